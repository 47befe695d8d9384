//! Logging out (`docs/subcommands.md` §3.10), for `kiwi logout` and ACP's `logout`: the stored
//! Kimi Code login is deleted and the managed provider, its models and the two Moonshot services
//! leave the default config.
//!
//! Invariants: idempotent (logging out when logged out succeeds and changes nothing); the config
//! file is rewritten only when something in it changed; MCP tokens, `device_id` and the refresh
//! lock are left alone; this process's cached token for the login is forgotten too, so a session
//! that is open here stops sending it.

use std::path::Path;

use super::credential;
use super::{KIMI_CODE_KEY, managed, tokens};

/// Logs out; `Err` is the readable reason (the part after "Logout failed: ").
pub fn log_out(share: &Path) -> Result<(), String> {
    let (mut config, config_path) = crate::config::load_default(share).map_err(|e| e.to_string())?;
    if let Some(path) = credential::path_for(share, KIMI_CODE_KEY) {
        match credential::remove(&path) {
            Ok(removed) => tracing::info!(path = %path.display(), removed, "logout: stored login"),
            Err(e) => return Err(format!("cannot delete {}: {e}", path.display())),
        }
    }
    tokens::forget(share, KIMI_CODE_KEY);
    if managed::apply_logout(&mut config) {
        managed::save(&config_path, &config)?;
    }
    Ok(())
}
