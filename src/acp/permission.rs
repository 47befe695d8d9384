//! Approvals as `session/request_permission` (`docs/acp.md` §12.3): three options with stable ids, in
//! this order; `approve_for_session` is ACP's "allow always" and approves the action for the rest
//! of the session. Any other answer (a reject, `cancelled`, something unreadable) rejects.

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallUpdate,
};
use serde_json::Value;

use crate::protocol::ApprovalDecision;

pub const METHOD: &str = "session/request_permission";
pub const APPROVE: &str = "approve";
pub const APPROVE_FOR_SESSION: &str = "approve_for_session";
pub const REJECT: &str = "reject";

pub fn request(session_id: &str, tool_call: ToolCallUpdate) -> RequestPermissionRequest {
    RequestPermissionRequest::new(
        session_id.to_string(),
        tool_call,
        vec![
            PermissionOption::new(APPROVE, "Approve once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(APPROVE_FOR_SESSION, "Approve for this session", PermissionOptionKind::AllowAlways),
            PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
        ],
    )
}

/// The request for one command outside the sandbox (spec sandbox.md §2.5): no "always".
pub fn escalation_request(session_id: &str, tool_call: ToolCallUpdate) -> RequestPermissionRequest {
    RequestPermissionRequest::new(
        session_id.to_string(),
        tool_call,
        vec![
            PermissionOption::new(APPROVE, "Approve once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
        ],
    )
}

/// The client's answer (the `result` of the request) as an approval decision.
pub fn decision(result: Value) -> ApprovalDecision {
    let Ok(response) = serde_json::from_value::<RequestPermissionResponse>(result) else {
        tracing::info!("unreadable answer to a permission request; rejecting");
        return ApprovalDecision::Reject;
    };
    match response.outcome {
        RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
            APPROVE => ApprovalDecision::Approve,
            APPROVE_FOR_SESSION => ApprovalDecision::ApproveForSession,
            _ => ApprovalDecision::Reject,
        },
        _ => ApprovalDecision::Reject,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::ToolCallUpdateFields;
    use serde_json::json;

    #[test]
    fn the_request_has_three_stable_options() {
        let r = request("s", ToolCallUpdate::new("t/1", ToolCallUpdateFields::new().title("Shell: ls".to_string())));
        assert_eq!(
            serde_json::to_value(r).unwrap(),
            json!({"sessionId":"s","toolCall":{"toolCallId":"t/1","title":"Shell: ls"},"options":[
                {"optionId":"approve","name":"Approve once","kind":"allow_once"},
                {"optionId":"approve_for_session","name":"Approve for this session","kind":"allow_always"},
                {"optionId":"reject","name":"Reject","kind":"reject_once"}]})
        );
    }

    #[test]
    fn answers_map_to_decisions() {
        let selected = |id: &str| json!({"outcome":{"outcome":"selected","optionId":id}});
        assert_eq!(decision(selected("approve")), ApprovalDecision::Approve);
        assert_eq!(decision(selected("approve_for_session")), ApprovalDecision::ApproveForSession);
        assert_eq!(decision(selected("reject")), ApprovalDecision::Reject);
        assert_eq!(decision(selected("made-up")), ApprovalDecision::Reject);
        assert_eq!(decision(json!({"outcome":{"outcome":"cancelled"}})), ApprovalDecision::Reject);
        assert_eq!(decision(json!({"nonsense":1})), ApprovalDecision::Reject);
    }
}
