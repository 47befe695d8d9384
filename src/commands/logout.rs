//! `kiwi logout [--json]` (`docs/subcommands.md` §3.10): deletes the stored Kimi Code login and
//! takes the managed provider, its models and the two Moonshot services out of the default
//! config.
//!
//! Invariants: idempotent (logging out when logged out prints the same success and exits 0);
//! the config file is rewritten only when something in it changed; MCP tokens, `device_id` and
//! the refresh lock are left alone.

use std::path::Path;

use super::{Reporter, managed};
use crate::auth::KIMI_CODE_KEY;
use crate::auth::credential;

pub(super) fn run(share: &Path, out: &mut Reporter) {
    let (mut config, config_path) = match crate::config::load_default(share) {
        Ok(loaded) => loaded,
        Err(e) => return out.error(&format!("Logout failed: {e}")),
    };
    if let Some(path) = credential::path_for(share, KIMI_CODE_KEY) {
        match credential::remove(&path) {
            Ok(removed) => tracing::info!(path = %path.display(), removed, "logout: stored login"),
            Err(e) => return out.error(&format!("Logout failed: cannot delete {}: {e}", path.display())),
        }
    }
    if managed::apply_logout(&mut config)
        && let Err(e) = managed::save(&config_path, &config)
    {
        return out.error(&format!("Logout failed: {e}"));
    }
    out.success("Logged out successfully.");
}
