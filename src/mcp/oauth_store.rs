//! Stored MCP OAuth tokens (`cli-subcommands.md` §1.8): one file-tree key–value store under
//! `<share_dir>/mcp-oauth/`, keyed by the server URL without its trailing `/`, laid out like the
//! reference's so tokens are shared with an installed kimi-cli.
//!
//! kiwi reads tokens (the agent sends them, `list` checks them) and removes them (`reset-auth`);
//! it does not run the browser flow that stores them (`kiwi mcp auth` says so).

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The three collections of the store.
const COLLECTIONS: [(&str, &str); 3] = [
    ("mcp-oauth-token", "tokens"),
    ("mcp-oauth-client-info", "client_info"),
    ("mcp-oauth-token-expiry", "token_expiry"),
];

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

/// The stored token record's value, when a record exists and is not past its own expiry (the
/// access token inside may be expired).
fn token_record(share_dir: &Path, url: &str) -> Option<Value> {
    let (collection, suffix) = COLLECTIONS[0];
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

/// Whether tokens are stored for `url` (what `list` and the agent check).
pub fn has_tokens(share_dir: &Path, url: &str) -> bool {
    token_record(share_dir, url).is_some()
}

/// The stored access token for `url`.
pub fn access_token(share_dir: &Path, url: &str) -> Option<String> {
    token_record(share_dir, url)?.get("access_token")?.as_str().map(str::to_string).filter(|t| !t.is_empty())
}

/// Creates the store's folder (0700) if missing, as checking tokens does in the reference.
pub fn ensure_store_dir(share_dir: &Path) {
    let dir = store_dir(share_dir);
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir);
    }
}

/// Deletes the tokens, client info and expiry stored for `url`; missing entries are fine.
pub fn clear(share_dir: &Path, url: &str) -> std::io::Result<()> {
    for (collection, suffix) in COLLECTIONS {
        match std::fs::remove_file(entry_path(share_dir, collection, suffix, url)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
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
}
