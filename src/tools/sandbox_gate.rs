//! The file tools under a sandboxed run (spec sandbox.md §6.3, §4): kiwi writes and reads those
//! files itself, so it applies the sandbox's rules by policy, before any approval.

use std::path::Path;

use super::ToolCallContext;
use crate::protocol::ToolReturnValue;
use crate::sandbox::{BLOCKED_BRIEF, read_denied_message};

/// The refusal of a write to `real` (resolved), or `None` when the sandbox allows it. The plan
/// file of plan mode is kiwi's own and stays writable.
pub fn write_refusal(ctx: &ToolCallContext, real: &Path) -> Option<ToolReturnValue> {
    let sandbox = ctx.env.sandbox.current();
    if !sandbox.is_on() {
        return None;
    }
    if let Some(plan) = ctx.host.plan_mode().file
        && crate::sandbox::resolve_lenient(&plan) == crate::sandbox::resolve_lenient(real)
    {
        return None;
    }
    let verdict = sandbox.check_write(real, &ctx.env.work_dir, &ctx.host.added_dirs());
    verdict.message(real).map(|message| ToolReturnValue::error(message, BLOCKED_BRIEF))
}

/// The refusal of a read of `path` under `deny_read`, or `None`.
pub fn read_refusal(ctx: &ToolCallContext, path: &Path) -> Option<ToolReturnValue> {
    let sandbox = ctx.env.sandbox.current();
    sandbox.read_denied(path).then(|| ToolReturnValue::error(read_denied_message(path), BLOCKED_BRIEF))
}
