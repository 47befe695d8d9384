//! Who decides an approval in the Claude dialect (`print-mode.md` C.3): the permission mode,
//! the allow and deny lists, and — only when someone can answer — the host over stdio.
//!
//! Invariants: the decision never waits for an absent user: without a prompt surface the answer
//! is a denial with a message of ours; the mode can change between decisions
//! (`set_permission_mode`), never during one.

use std::sync::RwLock;

use super::args::PermissionMode;

/// The file-edit tools `acceptEdits` lets through.
const EDIT_TOOLS: &[&str] = &["WriteFile", "StrReplaceFile"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Refused with this message (the call's result; the turn goes on).
    Deny(String),
    /// Ask the host with a `can_use_tool` control request.
    Ask,
}

pub struct Policy {
    mode: RwLock<PermissionMode>,
    skip_all: bool,
    allowed: Vec<String>,
    disallowed: Vec<String>,
    /// `--permission-prompt-tool stdio` with stream-json input: the host can answer.
    can_ask: bool,
}

impl Policy {
    pub fn new(
        mode: PermissionMode,
        skip_all: bool,
        allowed: Vec<String>,
        disallowed: Vec<String>,
        can_ask: bool,
    ) -> Self {
        Self { mode: RwLock::new(mode), skip_all, allowed, disallowed, can_ask }
    }

    pub fn mode(&self) -> PermissionMode {
        *self.mode.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_mode(&self, mode: PermissionMode) {
        *self.mode.write().unwrap_or_else(|p| p.into_inner()) = mode;
    }

    /// The mode `system/init` reports.
    pub fn reported_mode(&self) -> PermissionMode {
        if self.skip_all { PermissionMode::BypassPermissions } else { self.mode() }
    }

    pub fn decide(&self, tool: &str) -> Decision {
        let mode = self.mode();
        if self.skip_all || mode == PermissionMode::BypassPermissions {
            return Decision::Approve;
        }
        if mode == PermissionMode::Plan {
            return Decision::Deny(format!(
                "Permission to use {tool} was denied: in plan mode nothing is changed or run. Describe the plan instead."
            ));
        }
        if mode == PermissionMode::AcceptEdits && EDIT_TOOLS.contains(&tool) {
            return Decision::Approve;
        }
        if self.disallowed.iter().any(|t| t == tool) {
            return Decision::Deny(format!("Permission to use {tool} was denied: it is in --disallowedTools."));
        }
        if self.allowed.iter().any(|t| t == tool) {
            return Decision::Approve;
        }
        if self.can_ask && mode != PermissionMode::DontAsk {
            return Decision::Ask;
        }
        Decision::Deny(no_one_to_ask(tool))
    }
}

/// The denial when nobody can be asked.
pub fn no_one_to_ask(tool: &str) -> String {
    format!(
        "Permission to use {tool} was denied: nobody can be asked for it in this run (allow it with \
         --allowedTools, a permission mode, or --permission-prompt-tool stdio)."
    )
}

/// The denial when the host closed stdin with the question open.
pub fn host_gone(tool: &str) -> String {
    format!("Permission to use {tool} was denied: the host stopped answering before it decided.")
}

/// The denial when the host said no without saying why.
pub fn denied_by_host(tool: &str, message: &str) -> String {
    if message.trim().is_empty() {
        format!("Permission to use {tool} was denied by the host.")
    } else {
        message.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: PermissionMode, can_ask: bool) -> Policy {
        Policy::new(
            mode,
            false,
            vec!["ReadFile".into(), "Shell".into()],
            vec!["Shell".into(), "WriteFile".into()],
            can_ask,
        )
    }

    #[test]
    fn the_order_of_c3() {
        let p = Policy::new(PermissionMode::Default, true, vec![], vec!["Shell".into()], false);
        assert_eq!(p.decide("Shell"), Decision::Approve, "skip-permissions wins over everything");
        assert_eq!(p.reported_mode(), PermissionMode::BypassPermissions);
        assert_eq!(policy(PermissionMode::BypassPermissions, false).decide("Shell"), Decision::Approve);
        assert_eq!(policy(PermissionMode::AcceptEdits, false).decide("WriteFile"), Decision::Approve);
        assert!(
            matches!(policy(PermissionMode::Default, true).decide("Shell"), Decision::Deny(m) if m.contains("--disallowedTools"))
        );
        assert_eq!(policy(PermissionMode::Default, false).decide("ReadFile"), Decision::Approve);
        assert_eq!(policy(PermissionMode::Default, true).decide("StrReplaceFile"), Decision::Ask);
        assert!(
            matches!(policy(PermissionMode::Default, false).decide("StrReplaceFile"), Decision::Deny(m) if m.contains("nobody can be asked"))
        );
        assert!(matches!(policy(PermissionMode::DontAsk, true).decide("StrReplaceFile"), Decision::Deny(_)));
        assert!(
            matches!(policy(PermissionMode::Plan, true).decide("ReadFile"), Decision::Deny(m) if m.contains("plan mode"))
        );
    }

    #[test]
    fn the_mode_changes_between_decisions() {
        let p = policy(PermissionMode::Default, false);
        p.set_mode(PermissionMode::BypassPermissions);
        assert_eq!(p.decide("StrReplaceFile"), Decision::Approve);
        assert_eq!(denied_by_host("Shell", " "), "Permission to use Shell was denied by the host.");
        assert_eq!(denied_by_host("Shell", "not now"), "not now");
    }
}
