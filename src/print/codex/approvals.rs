//! codex exec's approval rule (spec codex-exec.md §10): nobody is ever asked. The sandbox
//! decides what commands and file edits may do; an MCP tool in a read-only run runs only when
//! its server annotates it `readOnlyHint` (else it would need an approval, which `never`
//! refuses); an escalation out of the sandbox is refused.
//!
//! Invariants: every request is answered at once; a refused MCP call gets codex's message as a
//! denial (the model reads it, the turn goes on).

use crate::protocol::{ApprovalDecision, ApprovalRequest};
use crate::soul::ClientAnswer;

/// codex's message for an MCP call the `never` policy cannot approve.
pub const MCP_NEEDS_APPROVAL: &str = "MCP tool call requires approval, but approval policy is never";

/// Why an escalation is refused (the model reads it).
pub const NO_APPROVALS: &str = "approval policy is never: kiwi's codex exec dialect asks nobody; \
the sandbox decides what may run";

/// What the run's rule needs to know.
pub struct Rule {
    /// The run is `--sandbox read-only`.
    pub read_only: bool,
    /// Whether the tool of this name is annotated `readOnlyHint`.
    pub read_only_hint: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Rule {
    pub fn answer(&self, request: &ApprovalRequest) -> ClientAnswer {
        if crate::tools::shell::is_escalation_action(&request.action) {
            return ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: NO_APPROVALS.into() };
        }
        let mcp = request.action.starts_with("mcp:");
        if mcp && self.read_only && !(self.read_only_hint)(&request.sender) {
            return ClientAnswer::Denial(MCP_NEEDS_APPROVAL.into());
        }
        ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(action: &str, sender: &str) -> ApprovalRequest {
        serde_json::from_value(serde_json::json!({"id": "a", "tool_call_id": "t", "sender": sender,
            "action": action, "description": "d"}))
        .unwrap()
    }

    fn approved(answer: ClientAnswer) -> bool {
        matches!(answer, ClientAnswer::Approval { decision: ApprovalDecision::Approve, .. })
    }

    #[test]
    fn only_hinted_mcp_tools_run_read_only() {
        let rule = |read_only| Rule { read_only, read_only_hint: Box::new(|name| name == "lookup") };
        assert!(approved(rule(true).answer(&ask("mcp:lookup", "lookup"))));
        assert!(
            matches!(rule(true).answer(&ask("mcp:write", "write")), ClientAnswer::Denial(m) if m == MCP_NEEDS_APPROVAL)
        );
        assert!(approved(rule(false).answer(&ask("mcp:write", "write"))));
        assert!(approved(rule(true).answer(&ask("run command", "Shell"))));
    }
}
