//! The config file as the web API shows and edits it (`docs/web-api.md` §5): the model
//! list with derived capabilities, the file's text with every secret redacted, in-place edits of
//! `default_model` / `default_thinking`, and whole-text replacement that keeps redacted secrets.
//!
//! Invariants: no secret-bearing string ever leaves [`redact`] (any `api_key`, every value under
//! `custom_headers`, `env` values whose name says KEY/TOKEN/SECRET/PASSWORD, any key whose name
//! says token/secret/password); the placeholder sent back for such a value keeps what the file on
//! disk holds; edits keep the file's comments and layout; writes are atomic.

use std::io::Write as _;
use std::path::Path;

use serde::Serialize;
use toml_edit::{DocumentMut, Item, Value};

use super::Config;

/// What a redacted secret reads as.
pub const REDACTED: &str = "********";

/// One model of `GET /api/config/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigModelView {
    pub provider: String,
    pub model: String,
    pub max_context_size: u64,
    pub capabilities: Option<Vec<String>>,
    pub display_name: Option<String>,
    pub name: String,
    pub provider_type: String,
}

/// `GET /api/config/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlobalConfigView {
    pub default_model: String,
    pub default_thinking: bool,
    pub models: Vec<ConfigModelView>,
}

/// The configured capabilities plus the ones a model's name implies: `thinking` and
/// `always_thinking` for names with `thinking` or `reason`, else `thinking`, `image_in` and
/// `video_in` for `kimi-for-coding` / `kimi-code`. `None` when empty.
pub fn derived_capabilities(model_name: &str, configured: &[String]) -> Option<Vec<String>> {
    let mut caps: Vec<String> = Vec::new();
    let mut add = |c: &str| {
        if !caps.iter().any(|x| x == c) {
            caps.push(c.to_string());
        }
    };
    for c in configured {
        add(c);
    }
    let lower = model_name.to_lowercase();
    if lower.contains("thinking") || lower.contains("reason") {
        add("thinking");
        add("always_thinking");
    } else if model_name == "kimi-for-coding" || model_name == "kimi-code" {
        add("thinking");
        add("image_in");
        add("video_in");
    }
    (!caps.is_empty()).then_some(caps)
}

/// The model keys of `models` in the order the file lists them (`text` is the file's TOML).
pub fn model_order(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<DocumentMut>() else { return Vec::new() };
    match doc.get("models") {
        Some(Item::Table(t)) => t.iter().map(|(k, _)| k.to_string()).collect(),
        Some(Item::Value(Value::InlineTable(t))) => t.iter().map(|(k, _)| k.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The view of `config`; models in `order` first (file order), then any others; models whose
/// provider is missing are left out.
pub fn global_view(config: &Config, order: &[String]) -> GlobalConfigView {
    let mut names: Vec<&String> = order.iter().filter(|n| config.models.contains_key(*n)).collect();
    names.extend(config.models.keys().filter(|k| !order.contains(k)));
    let models = names
        .into_iter()
        .filter_map(|name| {
            let m = &config.models[name];
            let provider = config.providers.get(&m.provider)?;
            Some(ConfigModelView {
                provider: m.provider.clone(),
                model: m.model.clone(),
                max_context_size: m.max_context_size,
                capabilities: derived_capabilities(&m.model, &m.capabilities),
                display_name: m.display_name.clone(),
                name: name.clone(),
                provider_type: super::diagnose::type_name(provider.kind).to_string(),
            })
        })
        .collect();
    GlobalConfigView { default_model: config.default_model.clone(), default_thinking: config.default_thinking, models }
}

fn is_secret(parent: Option<&str>, key: &str) -> bool {
    let lower = key.to_lowercase();
    if lower == "reasoning_key" {
        return false;
    }
    if lower == "api_key" || parent == Some("custom_headers") {
        return true;
    }
    if parent == Some("env") {
        let upper = key.to_uppercase();
        return ["KEY", "TOKEN", "SECRET", "PASSWORD"].iter().any(|w| upper.contains(w));
    }
    ["token", "secret", "password"].iter().any(|w| lower.contains(w))
}

/// Calls `f(path, key, value)` for every secret-bearing string value; `path` names the keys and
/// array indexes above it.
fn walk_secrets(item: &mut Item, path: &mut Vec<String>, f: &mut dyn FnMut(&[String], &mut Value)) {
    match item {
        Item::Table(t) => {
            for (k, v) in t.iter_mut() {
                path.push(k.get().to_string());
                visit(v, path, f);
                path.pop();
            }
        }
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter_mut().enumerate() {
                path.push(format!("[{i}]"));
                for (k, v) in t.iter_mut() {
                    path.push(k.get().to_string());
                    visit(v, path, f);
                    path.pop();
                }
                path.pop();
            }
        }
        Item::Value(v) => walk_value(v, path, f),
        Item::None => {}
    }
}

fn visit(item: &mut Item, path: &mut Vec<String>, f: &mut dyn FnMut(&[String], &mut Value)) {
    if let Item::Value(v) = item
        && v.is_str()
        && secret_path(path)
    {
        f(path, v);
        return;
    }
    walk_secrets(item, path, f);
}

fn secret_path(path: &[String]) -> bool {
    let Some(key) = path.last() else { return false };
    let parent = path.len().checked_sub(2).map(|i| path[i].as_str());
    is_secret(parent, key)
}

fn walk_value(v: &mut Value, path: &mut Vec<String>, f: &mut dyn FnMut(&[String], &mut Value)) {
    match v {
        Value::InlineTable(t) => {
            for (k, v) in t.iter_mut() {
                path.push(k.get().to_string());
                if v.is_str() && secret_path(path) {
                    f(path, v);
                } else {
                    walk_value(v, path, f);
                }
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter_mut().enumerate() {
                path.push(format!("[{i}]"));
                walk_value(v, path, f);
                path.pop();
            }
        }
        _ => {}
    }
}

fn set_str(v: &mut Value, text: &str) {
    let decor = v.decor().clone();
    *v = Value::from(text);
    *v.decor_mut() = decor;
}

/// The file's text with every secret replaced by [`REDACTED`], layout kept. Text that is not
/// TOML is not shown at all (it could hold anything): an error.
pub fn redact(text: &str) -> Result<String, String> {
    let mut doc = text.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    let mut path = Vec::new();
    walk_secrets(doc.as_item_mut(), &mut path, &mut |_, v| set_str(v, REDACTED));
    Ok(doc.to_string())
}

/// Every secret string of a document, by path.
fn secrets_of(text: &str) -> std::collections::HashMap<Vec<String>, String> {
    let mut out = std::collections::HashMap::new();
    if let Ok(mut doc) = text.parse::<DocumentMut>() {
        let mut path = Vec::new();
        walk_secrets(doc.as_item_mut(), &mut path, &mut |p, v| {
            if let Some(s) = v.as_str() {
                out.insert(p.to_vec(), s.to_string());
            }
        });
    }
    out
}

/// `new_text` with each [`REDACTED`] secret replaced by what `disk_text` holds at the same place
/// (a placeholder with nothing behind it stays as sent). A stored secret is kept only while the
/// table it belongs to (a provider, a service) keeps its `base_url` and `type`: a request that
/// points the provider elsewhere and sends the placeholder back would otherwise send the old key
/// to the new host (issue 30 item 8); that is refused with a message asking to enter it again.
pub fn restore_secrets(new_text: &str, disk_text: &str) -> Result<String, String> {
    let stored = secrets_of(disk_text);
    let disk = disk_text.parse::<DocumentMut>().ok();
    let mut doc = new_text.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    let sent = doc.clone();
    let mut moved: Option<String> = None;
    let mut path = Vec::new();
    walk_secrets(doc.as_item_mut(), &mut path, &mut |p, v| {
        if v.as_str() == Some(REDACTED)
            && let Some(real) = stored.get(p)
        {
            let owner = secret_owner(p);
            let same = |key: &str| {
                let at: Vec<String> = owner.iter().cloned().chain([key.to_string()]).collect();
                string_at(&sent, &at) == disk.as_ref().and_then(|d| string_at(d, &at))
            };
            if same("base_url") && same("type") {
                set_str(v, real);
            } else if moved.is_none() {
                moved = Some(p.join("."));
            }
        }
    });
    if let Some(place) = moved {
        return Err(format!(
            "The secret {place} was sent masked while its provider's base_url or type changed; enter it again"
        ));
    }
    Ok(doc.to_string())
}

/// The table a secret belongs to: its parent, or the one above a `custom_headers` or `env` table.
fn secret_owner(path: &[String]) -> &[String] {
    let parent = &path[..path.len().saturating_sub(1)];
    match parent.last().map(String::as_str) {
        Some("custom_headers" | "env") => &parent[..parent.len() - 1],
        _ => parent,
    }
}

/// The string at `path` of a document (keys and `[i]` indexes), if there is one.
fn string_at(doc: &DocumentMut, path: &[String]) -> Option<String> {
    let mut item = doc.as_item();
    for step in path {
        let index = step.strip_prefix('[').and_then(|s| s.strip_suffix(']')).and_then(|n| n.parse::<usize>().ok());
        item = match index {
            Some(i) => item.get(i)?,
            None => item.get(step.as_str())?,
        };
    }
    item.as_str().map(str::to_string)
}

/// Checks a whole config text as `PUT /api/config/toml` does: not empty, TOML (JSON is refused),
/// a valid config.
pub fn check_toml(content: &str) -> Result<(), String> {
    if content.trim().is_empty() {
        return Err("Configuration text cannot be empty".into());
    }
    let table = toml::from_str::<toml::Table>(content).map_err(|e| e.to_string().trim().to_string())?;
    let config: Config =
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| e.to_string().trim().to_string())?;
    super::load::validate(&config)
}

/// `text` with `default_model` and/or `default_thinking` set in place (other lines untouched).
pub fn set_defaults(text: &str, default_model: Option<&str>, default_thinking: Option<bool>) -> Result<String, String> {
    let mut doc = text.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    if let Some(m) = default_model {
        match doc.get_mut("default_model") {
            Some(Item::Value(v)) => set_str(v, m),
            _ => doc["default_model"] = toml_edit::value(m),
        }
    }
    if let Some(t) = default_thinking {
        match doc.get_mut("default_thinking") {
            Some(Item::Value(v)) => {
                let decor = v.decor().clone();
                *v = Value::from(t);
                *v.decor_mut() = decor;
            }
            _ => doc["default_thinking"] = toml_edit::value(t),
        }
    }
    Ok(doc.to_string())
}

/// Writes `text` to `path` atomically (a temporary file beside it, then a rename).
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".config.{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| {
        // Keep the file's permissions (a config with keys is often 0600).
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    });
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# my config
default_model = "scripted"   # the usual one
default_thinking = false

[models.scripted]
provider = "p"
model = "scripted_echo"
max_context_size = 100000
capabilities = ["image_in"]

[models.a-thinking]
provider = "p"
model = "k2-thinking"
max_context_size = 1000

[models.orphan]
provider = "nope"
model = "x"
max_context_size = 1

[providers.p]
type = "_scripted_echo"
base_url = "http://x"
api_key = "sk-secret-123"
custom_headers = { "X-Auth" = "hdr-secret", Other = "v" }
env = { KIMI_SCRIPTED_ECHO_SCRIPTS = "/s.txt", MY_API_KEY = "env-secret" }
reasoning_key = "reasoning_content"

[providers.p.oauth]
storage = "file"
key = "oauth/kimi-code"

[services.search]
base_url = "http://s"
api_key = "svc-secret"
access_token = "tok-secret"
"#;

    #[test]
    fn every_secret_is_redacted_and_layout_kept() {
        let red = redact(TEXT).unwrap();
        for secret in ["sk-secret-123", "hdr-secret", "env-secret", "svc-secret", "tok-secret", "\"v\""] {
            assert!(!red.contains(secret), "{secret} leaked:\n{red}");
        }
        assert!(red.contains("# my config") && red.contains("# the usual one"));
        assert!(red.contains("KIMI_SCRIPTED_ECHO_SCRIPTS = \"/s.txt\""));
        assert!(red.contains("reasoning_key = \"reasoning_content\""));
        assert!(red.contains("key = \"oauth/kimi-code\""));
        assert!(red.contains("api_key = \"********\""));
        assert!(redact("{\"json\": 1}").is_err());
    }

    #[test]
    fn placeholders_keep_the_stored_secrets() {
        let red = redact(TEXT).unwrap();
        let edited = red.replace("max_context_size = 1000\n", "max_context_size = 2000\n");
        let restored = restore_secrets(&edited, TEXT).unwrap();
        assert_eq!(restored, TEXT.replace("max_context_size = 1000\n", "max_context_size = 2000\n"));
        // A new secret value is taken as sent.
        let changed = red.replacen("api_key = \"********\"", "api_key = \"sk-new\"", 1);
        assert!(restore_secrets(&changed, TEXT).unwrap().contains("sk-new"));
    }

    #[test]
    fn a_masked_secret_does_not_follow_a_moved_provider() {
        let red = redact(TEXT).unwrap();
        assert!(red.contains("base_url = \"http://s\""), "{red}");
        let moved = red.replace("base_url = \"http://s\"", "base_url = \"https://attacker.example\"");
        let e = restore_secrets(&moved, TEXT).unwrap_err();
        assert!(e.starts_with("The secret services.search.") && e.ends_with("enter it again"), "{e}");
        // Re-entered, it is taken as sent.
        let typed = moved
            .replace("api_key = \"********\"\naccess_token = \"********\"", "api_key = \"new\"\naccess_token = \"t\"");
        assert!(restore_secrets(&typed, TEXT).unwrap().contains("https://attacker.example"), "{typed}");
    }

    #[test]
    fn the_view_lists_models_in_file_order_with_derived_capabilities() {
        let table: toml::Table = toml::from_str(TEXT).unwrap();
        let config: Config = toml::Value::Table(table).try_into().unwrap();
        let view = global_view(&config, &model_order(TEXT));
        assert_eq!(view.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["scripted", "a-thinking"]);
        assert_eq!(view.models[0].capabilities.as_deref(), Some(&["image_in".to_string()][..]));
        assert_eq!(view.models[0].provider_type, "_scripted_echo");
        let caps = view.models[1].capabilities.clone().unwrap();
        assert!(caps.contains(&"thinking".into()) && caps.contains(&"always_thinking".into()));
        assert_eq!(derived_capabilities("kimi-code", &[]).unwrap().len(), 3);
        assert_eq!(derived_capabilities("plain", &[]), None);
    }

    #[test]
    fn defaults_are_edited_in_place() {
        let out = set_defaults(TEXT, Some("a-thinking"), Some(true)).unwrap();
        assert!(out.contains("default_model = \"a-thinking\"   # the usual one"));
        assert!(out.contains("default_thinking = true\n"));
        assert_eq!(
            out.replace("\"a-thinking\"   #", "\"scripted\"   #").replace("thinking = true", "thinking = false"),
            TEXT
        );
        let added = set_defaults("", Some("m"), Some(false)).unwrap();
        assert!(added.contains("default_model = \"m\"") && added.contains("default_thinking = false"));
    }

    #[test]
    fn whole_texts_are_checked() {
        assert_eq!(check_toml("  \n").unwrap_err(), "Configuration text cannot be empty");
        assert!(check_toml("{\"default_model\": \"\"}").is_err(), "JSON is not TOML");
        assert!(check_toml("default_model = \"missing\"").unwrap_err().contains("missing"));
        assert!(
            check_toml(
                TEXT.replace("[models.orphan]\nprovider = \"nope\"\nmodel = \"x\"\nmax_context_size = 1\n", "")
                    .as_str()
            )
            .is_ok()
        );
    }
}
