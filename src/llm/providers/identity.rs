//! The device identity headers kimi-cli sends to Kimi (`X-Msh-*`, `docs/providers.md` §3.1).
//!
//! Invariants: values are ASCII-only (non-ASCII characters removed, `unknown` when nothing is
//! left); the device id is 32 lowercase hex characters persisted in `$KIMI_SHARE_DIR/device_id`
//! (default `~/.kimi`), created on first use. A share dir that cannot be written still yields a
//! stable-for-this-process id rather than failing the provider.

use std::path::PathBuf;

use super::KIMI_CLI_COMPAT_VERSION;

/// Whether to send the `X-Msh-*` headers. A gateway that is not Moonshot's has no use for the
/// host name, OS and device id: `KIWI_NO_DEVICE_HEADERS=1` (in the provider's `env` table or the
/// environment) leaves them out.
pub(crate) fn device_headers_enabled(settings: &crate::llm::settings::LlmSettings) -> bool {
    let off = settings.env_var("KIWI_NO_DEVICE_HEADERS");
    !matches!(off.as_deref().map(|v| v.trim().to_ascii_lowercase()).as_deref(), Some("1" | "true" | "yes" | "on"))
}

/// `X-Msh-*` header pairs, in the reference's order.
pub(crate) fn msh_headers() -> Vec<(&'static str, String)> {
    let uname = Uname::current();
    let model = format!("{} {} {}", uname.sysname, uname.release, uname.machine);
    vec![
        ("X-Msh-Platform", "kimi_cli".to_string()),
        ("X-Msh-Version", KIMI_CLI_COMPAT_VERSION.to_string()),
        ("X-Msh-Device-Name", ascii_only(&uname.nodename)),
        ("X-Msh-Device-Model", ascii_only(&model)),
        ("X-Msh-Os-Version", ascii_only(&uname.version)),
        ("X-Msh-Device-Id", device_id()),
    ]
}

fn ascii_only(s: &str) -> String {
    let kept: String = s.chars().filter(|c| c.is_ascii() && !c.is_ascii_control()).collect();
    let kept = kept.trim().to_string();
    if kept.is_empty() { "unknown".to_string() } else { kept }
}

fn share_dir() -> Option<PathBuf> {
    match std::env::var_os("KIMI_SHARE_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kimi")),
    }
}

fn device_id() -> String {
    let fresh = || uuid::Uuid::new_v4().simple().to_string();
    let Some(dir) = share_dir() else { return fresh() };
    let path = dir.join("device_id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if !id.is_empty() {
            return id.to_string();
        }
    }
    let id = fresh();
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &id)) {
        tracing::warn!(path = %path.display(), error = %e, "cannot persist the device id");
    }
    id
}

struct Uname {
    sysname: String,
    nodename: String,
    release: String,
    version: String,
    machine: String,
}

impl Uname {
    fn current() -> Self {
        // SAFETY: `uname` fills a zeroed, properly sized struct; the fields are NUL-terminated.
        let mut raw: libc::utsname = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::uname(&mut raw) } == 0;
        let field = |f: &[libc::c_char]| -> String {
            if !ok {
                return String::new();
            }
            let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Self {
            sysname: field(&raw.sysname),
            nodename: field(&raw.nodename),
            release: field(&raw.release),
            version: field(&raw.version),
            machine: field(&raw.machine),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_ascii() {
        assert_eq!(ascii_only("héllo"), "hllo");
        assert_eq!(ascii_only("é"), "unknown");
        let u = Uname::current();
        assert!(!u.sysname.is_empty());
    }
}
