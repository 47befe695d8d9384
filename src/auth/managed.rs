//! What `login` and `logout` change in the config (`docs/subcommands.md` §3.5, §3.10): the
//! managed provider `managed:kimi-code`, its `kimi-code/<id>` models, the default model and the
//! two Moonshot services, all pointing at the stored login `oauth/kimi-code`.
//!
//! Invariants: only those entries are touched; everything else in the config keeps its value
//! (the file is rewritten as a whole, like the reference's full dump, so comments and unknown
//! keys of a hand-written file do not survive a login or a logout that changed something).

use std::path::Path;

use super::KIMI_CODE_KEY;
use super::endpoints::{RemoteModel, join};
use crate::config::Config;
use crate::config::schema::{ModelConfig, OAuthRef, OAuthStorage, ProviderConfig, ProviderType, ServiceConfig};

pub const MANAGED_PROVIDER: &str = "managed:kimi-code";
pub const MODEL_PREFIX: &str = "kimi-code/";

fn kimi_code_ref() -> Option<OAuthRef> {
    Some(OAuthRef { storage: OAuthStorage::File, key: KIMI_CODE_KEY.to_string() })
}

/// A listed model's capabilities, in a fixed order (the reference's order is a set's).
pub fn capabilities(model: &RemoteModel) -> Vec<String> {
    let id = model.id.to_ascii_lowercase();
    let k2 = id.starts_with("kimi-k2");
    let thinking_id = id.contains("thinking");
    let wanted = [
        ("thinking", model.supports_reasoning || thinking_id || k2),
        ("always_thinking", thinking_id),
        ("image_in", model.supports_image_in || k2),
        ("video_in", model.supports_video_in || k2),
    ];
    wanted.iter().filter(|(_, on)| *on).map(|(name, _)| name.to_string()).collect()
}

/// The config after a login with these models (at least one).
pub fn apply_login(config: &mut Config, base_url: &str, models: &[RemoteModel]) {
    config.providers.insert(
        MANAGED_PROVIDER.to_string(),
        ProviderConfig {
            kind: ProviderType::Kimi,
            base_url: base_url.to_string(),
            api_key: String::new(),
            env: Default::default(),
            custom_headers: Default::default(),
            oauth: kimi_code_ref(),
            reasoning_key: None,
        },
    );
    // Prices the user wrote for a managed model outlive a fresh login (the server sends none).
    let prices: std::collections::BTreeMap<String, _> =
        config.models.iter().filter_map(|(k, m)| Some((k.clone(), m.usd_per_mtok?))).collect();
    config.models.retain(|_, m| m.provider != MANAGED_PROVIDER);
    for model in models {
        let key = format!("{MODEL_PREFIX}{}", model.id);
        config.models.insert(
            key.clone(),
            ModelConfig {
                provider: MANAGED_PROVIDER.to_string(),
                model: model.id.clone(),
                max_context_size: model.context_length,
                capabilities: capabilities(model),
                display_name: model.display_name.clone(),
                usd_per_mtok: prices.get(&key).copied(),
            },
        );
    }
    if let Some(first) = models.first() {
        config.default_model = format!("{MODEL_PREFIX}{}", first.id);
        config.default_thinking = capabilities(first).iter().any(|c| c == "thinking" || c == "always_thinking");
    }
    let service = |path: &str| ServiceConfig {
        base_url: join(base_url, path),
        api_key: String::new(),
        custom_headers: Default::default(),
        oauth: kimi_code_ref(),
    };
    config.services.moonshot_search = Some(service("search"));
    config.services.moonshot_fetch = Some(service("fetch"));
}

/// The config after a logout. Returns whether anything changed.
pub fn apply_logout(config: &mut Config) -> bool {
    let before = config.clone();
    config.providers.remove(MANAGED_PROVIDER);
    let removed: Vec<String> =
        config.models.iter().filter(|(_, m)| m.provider == MANAGED_PROVIDER).map(|(k, _)| k.clone()).collect();
    for key in &removed {
        config.models.remove(key);
    }
    if removed.contains(&config.default_model) {
        config.default_model = String::new();
    }
    // Both services go, whatever they point at (reference behavior, §3.10).
    config.services.moonshot_search = None;
    config.services.moonshot_fetch = None;
    *config != before
}

/// Writes the whole config as TOML, in place (the file keeps its permissions).
pub fn save(path: &Path, config: &Config) -> Result<(), String> {
    let text = toml::to_string(config).map_err(|e| format!("cannot serialize the config: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(id: &str) -> RemoteModel {
        RemoteModel { id: id.into(), context_length: 1000, ..RemoteModel::default() }
    }

    #[test]
    fn capabilities_from_flags_and_ids() {
        assert_eq!(capabilities(&remote("plain")), Vec::<String>::new());
        assert_eq!(capabilities(&remote("Kimi-K2-Turbo")), ["thinking", "image_in", "video_in"]);
        assert_eq!(capabilities(&remote("x-THINKING")), ["thinking", "always_thinking"]);
        let flags = RemoteModel { supports_reasoning: true, supports_video_in: true, ..remote("m") };
        assert_eq!(capabilities(&flags), ["thinking", "video_in"]);
    }

    #[test]
    fn login_then_logout() {
        let mut config: Config = toml::from_str(
            "default_model = \"mine\"\n[models.mine]\nprovider = \"p\"\nmodel = \"m\"\nmax_context_size = 1\n\
             [models.\"kimi-code/old\"]\nprovider = \"managed:kimi-code\"\nmodel = \"old\"\nmax_context_size = 1\n\
             [providers.p]\ntype = \"kimi\"\nbase_url = \"u\"\napi_key = \"k\"\n",
        )
        .unwrap();
        let models = [RemoteModel { display_name: Some("K".into()), ..remote("kimi-k2") }, remote("plain")];
        apply_login(&mut config, "http://base/v1/", &models);
        assert_eq!(config.default_model, "kimi-code/kimi-k2");
        assert!(config.default_thinking);
        assert!(!config.models.contains_key("kimi-code/old"));
        assert!(config.models.contains_key("mine"));
        let k2 = &config.models["kimi-code/kimi-k2"];
        assert_eq!((k2.max_context_size, k2.display_name.as_deref()), (1000, Some("K")));
        let search = config.services.moonshot_search.as_ref().unwrap();
        assert_eq!(search.base_url, "http://base/v1/search");
        assert_eq!(search.oauth.as_ref().unwrap().key, "oauth/kimi-code");
        crate::config::load::validate(&config).unwrap();
        let text = toml::to_string(&config).unwrap();
        assert!(
            text.contains("[providers.\"managed:kimi-code\".oauth]\nstorage = \"file\"\nkey = \"oauth/kimi-code\""),
            "{text}"
        );
        assert!(!text.contains("capabilities = []"), "empty capabilities are left out: {text}");
        let reread: Config = toml::from_str(&text).unwrap();
        assert_eq!(reread, config);

        assert!(apply_logout(&mut config));
        assert_eq!(config.default_model, "", "the default was a managed model");
        assert_eq!(config.models.keys().collect::<Vec<_>>(), ["mine"]);
        assert!(config.services.moonshot_search.is_none() && config.services.moonshot_fetch.is_none());
        assert!(!apply_logout(&mut config), "a second logout changes nothing");
    }
}
