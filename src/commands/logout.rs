//! `kiwi logout [--json]` (`docs/subcommands.md` §3.10): deletes the stored Kimi Code login and
//! takes the managed provider, its models and the two Moonshot services out of the default
//! config (`auth::logout`, which ACP's `logout` shares).

use std::path::Path;

use super::Reporter;

pub(super) fn run(share: &Path, out: &mut Reporter) {
    match crate::auth::logout::log_out(share) {
        Ok(()) => out.success("Logged out successfully."),
        Err(e) => out.error(&format!("Logout failed: {e}")),
    }
}
