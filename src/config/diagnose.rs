//! Config mistakes that do not stop kiwi but would cost a user time: keys nobody reads (typos),
//! a model name that is not configured, a provider without the endpoint or key its type needs.
//!
//! Each finding is one line naming the key, where it comes from and the likely fix. Start-up
//! logs each as a WARN (and prints it on stderr); the "no model" reason also travels with every
//! -32001 answer, so the client sees why.

use super::schema::Config;
use crate::llm::settings::{LlmSettings, ProviderType};

/// The keys kiwi reads, per table (for "did you mean" on an unknown key).
const TOP: &[&str] =
    &["default_model", "default_thinking", "models", "providers", "loop_control", "services", "mcp", "sandbox"];
const SANDBOX: &[&str] = &[
    "mode",
    "network",
    "writable_roots",
    "read_only_paths",
    "deny_read",
    "exclude_slash_tmp",
    "exclude_tmpdir_env_var",
    "auto_approve",
    "allow_escalation",
    "allow_landlock_only",
];
const MODEL: &[&str] = &["provider", "model", "max_context_size", "capabilities", "display_name", "usd_per_mtok"];
const PRICES: &[&str] = &["input", "output", "cache_read", "cache_write"];
const PROVIDER: &[&str] = &["type", "base_url", "api_key", "env", "custom_headers", "oauth", "reasoning_key"];
const LOOP: &[&str] = &[
    "max_steps_per_turn",
    "max_steps_per_run",
    "max_retries_per_step",
    "max_ralph_iterations",
    "reserved_context_size",
    "compaction_trigger_ratio",
    "max_session_tokens",
    "max_budget_usd",
];
const SERVICES: &[&str] = &["moonshot_search", "moonshot_fetch"];
const SERVICE: &[&str] = &["base_url", "api_key", "custom_headers", "oauth"];

/// A dollar budget with a model that has no prices: kiwi cannot count what it spends, so every
/// turn is refused (the rule of `docs/configuration.md` §2.4); said once at start-up.
pub fn budget_without_prices(config: &Config, model: Option<&str>) -> Option<String> {
    let limit = config.loop_control.max_budget_usd?;
    let priced = model.and_then(|m| config.models.get(m)).is_some_and(|m| m.usd_per_mtok.is_some());
    (!priced).then(|| {
        let name = model.unwrap_or("(from the environment)");
        format!(
            "a dollar budget of {} is set but model {name} has no prices ([models.\"{name}\".usd_per_mtok]): \
             every turn will be refused until it has",
            super::prices::dollars(limit)
        )
    })
}

/// One line about a key that was ignored, with a suggestion when one is close.
pub fn unknown_key(path: &str, source: &str) -> String {
    // An optional table's inside is reported with a `?` segment (`models.m.usd_per_mtok.?.x`).
    let cleaned: Vec<&str> = path.split('.').filter(|p| *p != "?").collect();
    let path = &cleaned.join(".");
    let mut parts = cleaned;
    let key = parts.pop().unwrap_or(path);
    let known: &[&str] = match parts.as_slice() {
        [] => TOP,
        ["models", _] => MODEL,
        ["models", _, "usd_per_mtok"] => PRICES,
        ["providers", _] => PROVIDER,
        ["loop_control"] => LOOP,
        ["services"] => SERVICES,
        ["services", _] => SERVICE,
        ["sandbox"] => SANDBOX,
        _ => &[],
    };
    match closest(key, known) {
        Some(near) => format!("{source}: unknown key '{path}' is ignored; did you mean '{near}'?"),
        None => format!("{source}: unknown key '{path}' is ignored (kiwi does not read it)"),
    }
}

/// The known key at the smallest edit distance, if it is close enough to be a typo.
fn closest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, k)| *d > 0 && *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Edit distance counting a swap of two neighbouring characters as one edit (optimal string
/// alignment), so the commonest typos (`defualt`, `wbe`) are one edit away. Also used by the
/// command line's "did you mean" (the CLI layer).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one two back is what a transposition extends.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(row[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut row);
    }
    prev[b.len()]
}

/// Why no model can be used, as one line for the user; `None` when the selection is usable.
pub fn no_model_reason(
    config: &Config,
    model_flag: Option<&str>,
    settings: &LlmSettings,
    source: &str,
) -> Option<String> {
    if settings.is_usable() {
        return None;
    }
    let known = || {
        let names: Vec<&str> = config.models.keys().map(String::as_str).collect();
        if names.is_empty() { "none are configured".to_string() } else { format!("configured: {}", names.join(", ")) }
    };
    if let Some(name) = model_flag
        && !config.models.contains_key(name)
    {
        return Some(format!("model '{name}' (from -m/--model) is not a key of [models] in {source} ({})", known()));
    }
    let Some(name) = model_flag.or(Some(config.default_model.as_str()).filter(|n| !n.is_empty())) else {
        return Some(format!(
            "no model is selected: set default_model in {source} to a key of [models] ({}), or pass -m",
            known()
        ));
    };
    let model = config.models.get(name)?;
    let provider_key = &model.provider;
    if settings.provider.base_url.is_empty() {
        return Some(format!(
            "providers.{provider_key}.base_url is empty in {source}; a '{}' provider needs one (e.g. {})",
            type_name(settings.provider.kind),
            example_base_url(settings.provider.kind)
        ));
    }
    if settings.model.model.is_empty() {
        return Some(format!("models.{name}.model is empty in {source}; set it to the provider's model id"));
    }
    None
}

/// Problems that do not make the model unusable but will fail its requests.
pub fn selection_warnings(settings: &LlmSettings, provider_key: Option<&str>, source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let needs_key =
        !matches!(settings.provider.kind, ProviderType::Echo | ProviderType::ScriptedEcho | ProviderType::Chaos);
    // A provider with a login (`oauth`) gets its key from the stored credential.
    let vertex_adc = settings.provider.kind == ProviderType::VertexAi;
    if vertex_adc
        && settings.is_usable()
        && let Some(problem) = crate::llm::providers::vertex_credentials_problem(settings)
    {
        out.push(problem);
    }
    if settings.is_usable()
        && needs_key
        && !vertex_adc
        && settings.provider.api_key.is_empty()
        && settings.provider.oauth.is_none()
    {
        let key = provider_key.unwrap_or("?");
        let env = match settings.provider.kind {
            ProviderType::Kimi => " or KIMI_API_KEY",
            ProviderType::OpenAiLegacy | ProviderType::OpenAiResponses => " or OPENAI_API_KEY",
            ProviderType::GoogleGenAi => " or GOOGLE_API_KEY",
            _ => "",
        };
        out.push(format!(
            "providers.{key}.api_key is empty in {source}; requests to {} will likely be refused (401): set it{env}",
            crate::llm::settings::loggable_url(&settings.provider.base_url)
        ));
    }
    out
}

pub fn type_name(kind: ProviderType) -> &'static str {
    match kind {
        ProviderType::Kimi => "kimi",
        ProviderType::OpenAiLegacy => "openai_legacy",
        ProviderType::OpenAiResponses => "openai_responses",
        ProviderType::Anthropic => "anthropic",
        ProviderType::GoogleGenAi => "google_genai",
        ProviderType::VertexAi => "vertexai",
        ProviderType::Echo => "_echo",
        ProviderType::ScriptedEcho => "_scripted_echo",
        ProviderType::Chaos => "_chaos",
    }
}

fn example_base_url(kind: ProviderType) -> &'static str {
    match kind {
        ProviderType::Kimi | ProviderType::Chaos => "https://api.moonshot.ai/v1",
        ProviderType::OpenAiLegacy | ProviderType::OpenAiResponses => "https://api.openai.com/v1",
        ProviderType::Anthropic => "https://api.anthropic.com",
        ProviderType::GoogleGenAi => "https://generativelanguage.googleapis.com",
        ProviderType::VertexAi => "https://<region>-aiplatform.googleapis.com",
        ProviderType::Echo | ProviderType::ScriptedEcho => "(none needed)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::load_text;
    use crate::config::select::{ProcessEnv, select};

    #[test]
    fn edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("wbe", "web"), 1);
        assert_eq!(edit_distance("sesions", "sessions"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    #[test]
    fn typos_get_a_suggestion() {
        assert_eq!(
            unknown_key("defualt_model", "config.toml"),
            "config.toml: unknown key 'defualt_model' is ignored; did you mean 'default_model'?"
        );
        assert_eq!(
            unknown_key("providers.p.bsae_url", "c"),
            "c: unknown key 'providers.p.bsae_url' is ignored; did you mean 'base_url'?"
        );
        assert_eq!(unknown_key("telemetry", "c"), "c: unknown key 'telemetry' is ignored (kiwi does not read it)");
    }

    #[test]
    fn reasons_name_the_key_and_the_fix() {
        let c = load_text(r#"{"default_model":"a","models":{"a":{"provider":"p","model":"k2","max_context_size":1}},"providers":{"p":{"type":"kimi"}}}"#).unwrap();
        let s = select(&c, Some("zz"), None, &ProcessEnv).unwrap();
        assert_eq!(
            no_model_reason(&c, Some("zz"), &s, "f.toml").unwrap(),
            "model 'zz' (from -m/--model) is not a key of [models] in f.toml (configured: a)"
        );
        let s = select(&c, None, None, &std::collections::HashMap::new()).unwrap();
        assert_eq!(
            no_model_reason(&c, None, &s, "f.toml").unwrap(),
            "providers.p.base_url is empty in f.toml; a 'kimi' provider needs one (e.g. https://api.moonshot.ai/v1)"
        );
        let empty = load_text("{}").unwrap();
        let s = select(&empty, None, None, &std::collections::HashMap::new()).unwrap();
        assert!(no_model_reason(&empty, None, &s, "f").unwrap().starts_with("no model is selected"));
    }

    #[test]
    fn a_missing_api_key_is_a_warning() {
        let c = load_text(r#"{"default_model":"a","models":{"a":{"provider":"p","model":"k2","max_context_size":1}},"providers":{"p":{"type":"openai_legacy","base_url":"http://x/v1"}}}"#).unwrap();
        let s = select(&c, None, None, &std::collections::HashMap::new()).unwrap();
        assert_eq!(
            selection_warnings(&s, Some("p"), "f"),
            [
                "providers.p.api_key is empty in f; requests to http://x/v1 will likely be refused (401): set it or OPENAI_API_KEY"
            ]
        );
    }

    #[test]
    fn vertex_credentials_are_checked_at_start_up() {
        let config = |creds: &str| {
            load_text(&format!(
                r#"{{"default_model":"a","models":{{"a":{{"provider":"v","model":"gemini-2.5-pro","max_context_size":1}}}},"providers":{{"v":{{"type":"vertexai","base_url":"http://x","env":{{"GOOGLE_APPLICATION_CREDENTIALS":"{creds}","GOOGLE_CLOUD_PROJECT":"p"}}}}}}}}"#
            ))
            .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let c = config(missing.to_str().unwrap());
        let s = select(&c, None, None, &std::collections::HashMap::new()).unwrap();
        assert_eq!(
            selection_warnings(&s, Some("v"), "f"),
            [format!(
                "Vertex AI credentials {}: the file does not exist (set GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON file, or set an API key)",
                missing.display()
            )]
        );
        let user = dir.path().join("user.json");
        std::fs::write(&user, r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#)
            .unwrap();
        let c = config(user.to_str().unwrap());
        let s = select(&c, None, None, &std::collections::HashMap::new()).unwrap();
        assert!(selection_warnings(&s, Some("v"), "f").is_empty());
    }
}
