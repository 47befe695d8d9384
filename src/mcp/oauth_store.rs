//! Stored MCP OAuth tokens (`docs/subcommands.md` §1.8): one file-tree key–value store under
//! `<share_dir>/mcp-oauth/`, keyed by the server URL without its trailing `/`, laid out like the
//! reference's so tokens are shared with an installed kimi-cli.
//!
//! `kiwi mcp auth` writes the tokens, the registered client and the access token's absolute
//! expiry; the agent and `kiwi mcp test` read them (and write refreshed tokens back); `list`
//! checks them; `reset-auth` removes them. Records are written with sorted keys, ISO-8601 UTC
//! times with microseconds and a one-year record lifetime, as the reference's store writes them.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The three collections of the store: (collection, key suffix).
const COLLECTIONS: [(&str, &str); 3] = [TOKENS, CLIENT_INFO, TOKEN_EXPIRY];
const TOKENS: (&str, &str) = ("mcp-oauth-token", "tokens");
const CLIENT_INFO: (&str, &str) = ("mcp-oauth-client-info", "client_info");
const TOKEN_EXPIRY: (&str, &str) = ("mcp-oauth-token-expiry", "token_expiry");

/// How long a token or expiry record lives (the reference's store drops older ones: a refresh
/// token unused for a year is given up).
const RECORD_TTL_DAYS: i64 = 365;

pub fn store_dir(share_dir: &Path) -> PathBuf {
    share_dir.join("mcp-oauth")
}

/// `S_` + the name with each run of characters outside `[A-Za-z0-9_]` replaced by one `_`, then
/// `-` and the first 8 hex digits of the name's SHA-256.
fn sanitize(name: &str) -> String {
    let mut out = String::from("S_");
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{out}-{hex}")
}

fn entry_path(share_dir: &Path, collection: &str, suffix: &str, url: &str) -> PathBuf {
    let key = format!("{}/{suffix}", url.trim_end_matches('/'));
    store_dir(share_dir).join(sanitize(collection)).join(format!("{}.json", sanitize(&key)))
}

/// The value of one record, when it exists and is not past its own expiry.
fn read_record(share_dir: &Path, (collection, suffix): (&str, &str), url: &str) -> Option<Value> {
    let text = std::fs::read_to_string(entry_path(share_dir, collection, suffix, url)).ok()?;
    let record: Value = serde_json::from_str(&text).ok()?;
    if let Some(expires) = record.get("expires_at").and_then(Value::as_str)
        && let Ok(at) = chrono::DateTime::parse_from_rfc3339(expires)
        && at < chrono::Utc::now()
    {
        return None;
    }
    record.get("value").cloned()
}

/// Whether tokens are stored for `url` (what `list` and the agent check): a token record exists
/// and is not past its own expiry; the access token inside may be expired.
pub fn has_tokens(share_dir: &Path, url: &str) -> bool {
    read_record(share_dir, TOKENS, url).is_some()
}

/// The stored OAuth token JSON (`access_token`, `refresh_token`, `expires_in`, …) for `url`.
pub fn tokens(share_dir: &Path, url: &str) -> Option<Map<String, Value>> {
    match read_record(share_dir, TOKENS, url)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// The stored access token for `url`.
pub fn access_token(share_dir: &Path, url: &str) -> Option<String> {
    tokens(share_dir, url)?.get("access_token")?.as_str().map(str::to_string).filter(|t| !t.is_empty())
}

/// The client registered with the authorization server for `url` (registration answer JSON).
pub fn client_info(share_dir: &Path, url: &str) -> Option<Map<String, Value>> {
    match read_record(share_dir, CLIENT_INFO, url)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// When the stored access token expires, in epoch seconds; `None` when no expiry is known.
pub fn token_expiry(share_dir: &Path, url: &str) -> Option<f64> {
    read_record(share_dir, TOKEN_EXPIRY, url)?.get("expires_at")?.as_f64()
}

/// Stores a token answer and, when it says how long the access token lives, its absolute
/// expiry (a token answer without `expires_in` removes an older expiry).
pub fn save_tokens(share_dir: &Path, url: &str, token: &Map<String, Value>) -> std::io::Result<()> {
    // The reference's token model: these five members, nothing else.
    let mut value = Map::new();
    for key in ["access_token", "expires_in", "refresh_token", "scope", "token_type"] {
        value.insert(key.to_string(), token.get(key).cloned().unwrap_or(Value::Null));
    }
    if value["token_type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("bearer")) {
        value.insert("token_type".into(), json!("Bearer"));
    }
    let ttl = Some(chrono::Duration::days(RECORD_TTL_DAYS));
    write_record(share_dir, TOKENS, url, Value::Object(value), ttl)?;
    match token.get("expires_in").and_then(Value::as_f64) {
        Some(lifetime) => {
            let at = chrono::Utc::now().timestamp_micros() as f64 / 1e6 + lifetime;
            write_record(share_dir, TOKEN_EXPIRY, url, json!({ "expires_at": at }), ttl)
        }
        None => remove(share_dir, TOKEN_EXPIRY, url),
    }
}

/// Stores the registered client (no record expiry: it lives until `reset-auth`).
pub fn save_client_info(share_dir: &Path, url: &str, info: &Map<String, Value>) -> std::io::Result<()> {
    write_record(share_dir, CLIENT_INFO, url, Value::Object(sorted(info)), None)
}

/// The lock file that serializes refreshing `url`'s tokens across kiwi processes.
pub fn refresh_lock_path(share_dir: &Path, url: &str) -> PathBuf {
    store_dir(share_dir).join(format!("{}.lock", sanitize(&format!("{}/refresh", url.trim_end_matches('/')))))
}

/// Forgets the registered client (the authorization server no longer knows it).
pub fn clear_client_info(share_dir: &Path, url: &str) -> std::io::Result<()> {
    remove(share_dir, CLIENT_INFO, url)
}

fn sorted(map: &Map<String, Value>) -> Map<String, Value> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn iso(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes one record (0600) as `{"created_at", "expires_at", "value", "version"}`, creating the
/// collection's folder and its sibling `<dir>-info.json` when missing.
fn write_record(
    share_dir: &Path,
    (collection, suffix): (&str, &str),
    url: &str,
    value: Value,
    ttl: Option<chrono::Duration>,
) -> std::io::Result<()> {
    let path = entry_path(share_dir, collection, suffix, url);
    let dir = store_dir(share_dir).join(sanitize(collection));
    make_dir(&dir)?;
    let info = dir.with_file_name(format!("{}-info.json", sanitize(collection)));
    if !info.exists() {
        let now = iso(chrono::Utc::now());
        let text =
            json!({"collection": collection, "created_at": now, "directory": sanitize(collection), "version": 1});
        write_private(&info, text.to_string().as_bytes())?;
    }
    let now = chrono::Utc::now();
    let mut record = Map::new();
    record.insert("created_at".into(), json!(iso(now)));
    if let Some(ttl) = ttl {
        record.insert("expires_at".into(), json!(iso(now + ttl)));
    }
    record.insert("value".into(), value);
    record.insert("version".into(), json!(1));
    write_private(&path, Value::Object(record).to_string().as_bytes())
}

/// Replaces `path` with `bytes`, mode 0600, through a temporary file so that a reader never
/// sees half a record.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn remove(share_dir: &Path, (collection, suffix): (&str, &str), url: &str) -> std::io::Result<()> {
    match std::fs::remove_file(entry_path(share_dir, collection, suffix, url)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Creates the store's folder (0700) if missing, as checking tokens does in the reference.
pub fn ensure_store_dir(share_dir: &Path) {
    let dir = store_dir(share_dir);
    if !dir.exists() {
        let _ = make_dir(&dir);
    }
}

/// Deletes the tokens, client info and expiry stored for `url`; missing entries are fine.
pub fn clear(share_dir: &Path, url: &str) -> std::io::Result<()> {
    for collection in COLLECTIONS {
        remove(share_dir, collection, url)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_like_the_reference() {
        let p = entry_path(Path::new("/s"), "mcp-oauth-token", "tokens", "https://mcp.example.com/mcp/");
        assert_eq!(
            p,
            Path::new("/s/mcp-oauth/S_mcp_oauth_token-3a009b34/S_https_mcp_example_com_mcp_tokens-250f4d5c.json")
        );
    }

    #[test]
    fn tokens_are_read_while_the_record_lives_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let url = "http://127.0.0.1:1/mcp";
        assert!(!has_tokens(dir.path(), url));
        let path = entry_path(dir.path(), "mcp-oauth-token", "tokens", url);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let record = |expires: &str| {
            format!(
                r#"{{"created_at":"2026-01-01T00:00:00Z","expires_at":"{expires}","value":{{"access_token":"tok"}},"version":1}}"#
            )
        };
        std::fs::write(&path, record("2999-01-01T00:00:00+00:00")).unwrap();
        assert_eq!(access_token(dir.path(), url).as_deref(), Some("tok"));
        std::fs::write(&path, record("2001-01-01T00:00:00+00:00")).unwrap();
        assert!(!has_tokens(dir.path(), url));
        clear(dir.path(), url).unwrap();
        assert!(!path.exists());
        clear(dir.path(), url).unwrap();
    }

    #[test]
    fn saved_records_read_back_in_the_reference_shape() {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path();
        let url = "http://127.0.0.1:1/mcp/";
        let token =
            json!({"access_token": "a", "token_type": "bearer", "expires_in": 60, "refresh_token": "r", "extra": 1});
        save_tokens(share, url, token.as_object().unwrap()).unwrap();
        let stored = tokens(share, "http://127.0.0.1:1/mcp").unwrap();
        assert_eq!(
            Value::Object(stored),
            json!({"access_token": "a", "expires_in": 60, "refresh_token": "r", "scope": null, "token_type": "Bearer"})
        );
        let expiry = token_expiry(share, url).unwrap();
        let now = chrono::Utc::now().timestamp() as f64;
        assert!((expiry - now - 60.0).abs() < 5.0);
        let text = std::fs::read_to_string(entry_path(share, "mcp-oauth-token", "tokens", url)).unwrap();
        assert!(text.starts_with(r#"{"created_at":""#) && text.ends_with(r#","version":1}"#), "{text}");
        let info = json!({"redirect_uris": ["http://localhost:1/callback"], "client_id": "c"});
        save_client_info(share, url, info.as_object().unwrap()).unwrap();
        let keys: Vec<String> = client_info(share, url).unwrap().keys().cloned().collect();
        assert_eq!(keys, ["client_id", "redirect_uris"]);
        assert!(share.join("mcp-oauth/S_mcp_oauth_client_info-92af0fc1-info.json").is_file());
        // A token answer without a lifetime drops the old expiry.
        save_tokens(share, url, json!({"access_token": "b"}).as_object().unwrap()).unwrap();
        assert_eq!(token_expiry(share, url), None);
        clear_client_info(share, url).unwrap();
        assert!(client_info(share, url).is_none());
        assert!(has_tokens(share, url));
    }
}
