//! Stored OAuth credentials (`docs/subcommands.md` §3.6): one JSON file per key in
//! `<share>/credentials/`, shared with kimi-cli (either program may rotate the tokens).
//!
//! Invariants:
//! * a key maps to one plain file name or to nothing: a key whose name would be a path (empty,
//!   `.`, `..`, a NUL) has no credential, so a config can never make kiwi read or write outside
//!   the credentials folder;
//! * reading is lenient: missing or mistyped members read as empty / 0; a file that is missing,
//!   unreadable, not JSON or not an object is "no credential", never an error;
//! * writing is atomic: a uniquely named temporary file in the same folder, fsync, mode 0600,
//!   rename; a reader (another kiwi, kimi-cli) sees the old file or the new one, never half;
//! * token values never reach a log line or a `Debug` output.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng as _;
use serde_json::{Map, Value};

/// The folder under the share dir.
pub const CREDENTIALS_DIR: &str = "credentials";

/// One stored login. `expires_at` is in seconds since the epoch (0: unknown).
#[derive(Clone, PartialEq)]
pub struct Credential {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_at: f64,
    pub scope: String,
    pub token_type: String,
    pub expires_in: f64,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens are secrets: only their presence is shown.
        f.debug_struct("Credential")
            .field("access_token", &redacted(&self.access_token))
            .field("refresh_token", &redacted(&self.refresh_token))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

fn redacted(s: &str) -> &'static str {
    if s.is_empty() { "<empty>" } else { "<redacted>" }
}

/// Seconds since the epoch, as the file stores them.
pub fn now_epoch() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs_f64()
}

impl Credential {
    /// A credential is only worth sending when it has an access token.
    pub fn is_usable(&self) -> bool {
        !self.access_token.is_empty()
    }

    /// Lenient reading of a stored object (§3.6).
    pub fn from_stored(obj: &Map<String, Value>) -> Self {
        Self {
            access_token: str_member(obj, "access_token"),
            refresh_token: str_member(obj, "refresh_token"),
            expires_at: num_member(obj, "expires_at"),
            scope: str_member(obj, "scope"),
            token_type: str_member(obj, "token_type"),
            expires_in: num_member(obj, "expires_in"),
        }
    }

    /// A token endpoint's 200 answer (§3.3 step 4, §3.8): `access_token`, `refresh_token`,
    /// `expires_in`, `scope` and `token_type` are required; `expires_at` = `now` + `expires_in`.
    pub fn from_token_response(obj: &Map<String, Value>, now: f64) -> Option<Self> {
        let text = |name: &str| obj.get(name).and_then(Value::as_str).map(str::to_string);
        let access_token = text("access_token").filter(|t| !t.is_empty())?;
        let refresh_token = text("refresh_token").filter(|t| !t.is_empty())?;
        let expires_in = obj.get("expires_in").and_then(number)?;
        let scope = text("scope")?;
        let token_type = text("token_type")?;
        Some(Self { access_token, refresh_token, expires_at: now + expires_in, scope, token_type, expires_in })
    }

    /// The file's one line: Python's default JSON separators, members in the reference's order,
    /// no trailing newline.
    pub fn to_file_bytes(&self) -> Vec<u8> {
        let mut obj = Map::new();
        obj.insert("access_token".into(), Value::String(self.access_token.clone()));
        obj.insert("refresh_token".into(), Value::String(self.refresh_token.clone()));
        obj.insert("expires_at".into(), float(self.expires_at));
        obj.insert("scope".into(), Value::String(self.scope.clone()));
        obj.insert("token_type".into(), Value::String(self.token_type.clone()));
        obj.insert("expires_in".into(), float(self.expires_in));
        let mut line = crate::session::pyjson::to_line(&Value::Object(obj)).unwrap_or_default();
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        line
    }
}

/// Floats stay floats (`900.0`, as Python writes them).
fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::from(0.0))
}

fn str_member(obj: &Map<String, Value>, name: &str) -> String {
    obj.get(name).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn num_member(obj: &Map<String, Value>, name: &str) -> f64 {
    obj.get(name).and_then(number).unwrap_or(0.0)
}

/// A finite number, also from a numeric string (files written by hand or by other tools).
fn number(v: &Value) -> Option<f64> {
    let f = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    f.is_finite().then_some(f)
}

/// The file name stem of a key: without a leading `oauth/`, its last `/`-separated segment (the
/// whole rest when that segment is empty). `None` when that is not a plain file name.
pub fn file_stem(key: &str) -> Option<String> {
    let rest = key.strip_prefix("oauth/").unwrap_or(key);
    let last = rest.rsplit('/').next().unwrap_or_default();
    let name = if last.is_empty() { rest } else { last };
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
    plain.then(|| name.to_string())
}

/// `<share>/credentials/<stem>.json`, or `None` for a key that names no file.
pub fn path_for(share: &Path, key: &str) -> Option<PathBuf> {
    file_stem(key).map(|stem| share.join(CREDENTIALS_DIR).join(format!("{stem}.json")))
}

/// `<share>/credentials/<stem>.lock`: the cross-process refresh lock.
pub fn lock_path_for(share: &Path, key: &str) -> Option<PathBuf> {
    file_stem(key).map(|stem| share.join(CREDENTIALS_DIR).join(format!("{stem}.lock")))
}

/// Reads a credential file; `None` for anything that is not a JSON object.
pub fn read(path: &Path) -> Option<Credential> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the stored login");
            return None;
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(obj)) => Some(Credential::from_stored(&obj)),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "the stored login is not a JSON object; ignoring it");
            None
        }
        Err(_) => {
            // The parser's message could quote the file; it is not logged.
            tracing::warn!(path = %path.display(), "the stored login is not JSON; ignoring it");
            None
        }
    }
}

/// Writes a credential file atomically with mode 0600 (creating the folder if needed).
pub fn write(path: &Path, credential: &Credential) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("the credential path has no folder"))?;
    std::fs::create_dir_all(dir)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("credential");
    let unique: u64 = rand::rng().random();
    let tmp = dir.join(format!(".{file_name}.{}.{unique:016x}.tmp", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(&credential.to_file_bytes())?;
        file.sync_all()?;
        // The umask may have narrowed the mode; it must be exactly 0600 either way.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Deletes a credential file; `Ok(false)` when there was none.
pub fn remove(path: &Path) -> std::io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// An exclusive `flock` on the refresh lock file, released when dropped (the file closes).
pub struct RefreshLock {
    _file: File,
}

/// Tries to take the cross-process refresh lock: up to 5 retries 1–2 s apart (§3.6). `None`
/// when it stays busy or cannot be opened; the caller then refreshes without it, as the
/// reference does, so a stale lock never blocks a login for good.
pub async fn lock(path: &Path) -> Option<RefreshLock> {
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(path = %dir.display(), error = %e, "cannot create the credentials folder");
        return None;
    }
    let file = match OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot open the refresh lock");
            return None;
        }
    };
    for attempt in 0..=5 {
        // SAFETY: `flock` on a descriptor we own; it does not touch memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Some(RefreshLock { _file: file });
        }
        if attempt == 5 {
            break;
        }
        let wait = Duration::from_millis(rand::rng().random_range(1000..=2000));
        tokio::time::sleep(wait).await;
    }
    tracing::warn!(path = %path.display(), "the refresh lock stays busy; refreshing without it");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_to_file_name() {
        assert_eq!(file_stem("oauth/kimi-code").as_deref(), Some("kimi-code"));
        assert_eq!(file_stem("oauth/foo").as_deref(), Some("foo"));
        assert_eq!(file_stem("oauth/a/b").as_deref(), Some("b"));
        assert_eq!(file_stem("plain").as_deref(), Some("plain"));
        for bad in ["", "oauth/", "oauth/..", "..", "x/..", ".", "oauth/a/", "a\0b"] {
            assert_eq!(file_stem(bad), None, "{bad:?}");
        }
        let share = Path::new("/s");
        assert_eq!(path_for(share, "oauth/kimi-code").unwrap(), Path::new("/s/credentials/kimi-code.json"));
        assert_eq!(lock_path_for(share, "oauth/kimi-code").unwrap(), Path::new("/s/credentials/kimi-code.lock"));
    }

    #[test]
    fn file_format_and_round_trip() {
        let c = Credential {
            access_token: "a".into(),
            refresh_token: "r".into(),
            expires_at: 1700000000.5,
            scope: "kimi-code".into(),
            token_type: "Bearer".into(),
            expires_in: 900.0,
        };
        assert_eq!(
            String::from_utf8(c.to_file_bytes()).unwrap(),
            r#"{"access_token": "a", "refresh_token": "r", "expires_at": 1700000000.5, "scope": "kimi-code", "token_type": "Bearer", "expires_in": 900.0}"#
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials/kimi-code.json");
        write(&path, &c).unwrap();
        assert_eq!(read(&path).unwrap(), c);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        assert!(remove(&path).unwrap());
        assert!(!remove(&path).unwrap());
    }

    #[test]
    fn reading_is_lenient() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        assert_eq!(read(&path), None, "missing file");
        for bad in ["", "not json", "[1,2]", "\"text\"", "null", "{"] {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(read(&path), None, "{bad:?}");
        }
        std::fs::write(&path, r#"{"access_token": "a", "expires_at": "12.5", "expires_in": null, "scope": 3}"#)
            .unwrap();
        let c = read(&path).unwrap();
        assert_eq!((c.access_token.as_str(), c.refresh_token.as_str(), c.scope.as_str()), ("a", "", ""));
        assert_eq!((c.expires_at, c.expires_in), (12.5, 0.0));
        assert!(c.is_usable());
        std::fs::write(&path, "{}").unwrap();
        assert!(!read(&path).unwrap().is_usable());
        let debug = format!("{c:?}");
        assert!(!debug.contains("\"a\""), "{debug}");
    }

    #[test]
    fn token_responses_need_every_member() {
        let full = serde_json::json!({"access_token": "a", "refresh_token": "r", "expires_in": 900,
            "scope": "s", "token_type": "Bearer"});
        let c = Credential::from_token_response(full.as_object().unwrap(), 100.0).unwrap();
        assert_eq!((c.expires_at, c.expires_in), (1000.0, 900.0));
        for missing in ["access_token", "refresh_token", "expires_in", "scope", "token_type"] {
            let mut v = full.clone();
            v.as_object_mut().unwrap().remove(missing);
            assert!(Credential::from_token_response(v.as_object().unwrap(), 0.0).is_none(), "{missing}");
        }
        let mut v = full.clone();
        v["access_token"] = "".into();
        assert!(Credential::from_token_response(v.as_object().unwrap(), 0.0).is_none());
    }
}
