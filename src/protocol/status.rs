//! `StatusUpdate` and its parts (`docs/protocol-1.10.md` §3.2): token usage, context fill, plan mode and
//! MCP loading state, and (for the front ends, never serialized) the step's cost.
//!
//! Invariants: all seven members are always serialized, in the spec's order; `null` means "no
//! change", so each sender sets only its own members (see the constructors). Records written by a
//! 1.2 server (three members) read back with the four newer ones as `null`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenUsage {
    pub input_other: u64,
    pub output: u64,
    #[serde(default)]
    pub input_cache_read: u64,
    #[serde(default)]
    pub input_cache_creation: u64,
}

impl TokenUsage {
    /// All input tokens of the call (what fills the context window).
    pub fn input(&self) -> u64 {
        self.input_other + self.input_cache_read + self.input_cache_creation
    }

    pub fn total(&self) -> u64 {
        self.input() + self.output
    }

    /// Adds another call's tokens to these.
    pub fn add(&mut self, other: TokenUsage) {
        self.input_other += other.input_other;
        self.output += other.output;
        self.input_cache_read += other.input_cache_read;
        self.input_cache_creation += other.input_cache_creation;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StatusUpdate {
    #[serde(default)]
    pub context_usage: Option<f64>,
    #[serde(default)]
    pub context_tokens: Option<u64>,
    #[serde(default)]
    pub max_context_tokens: Option<u64>,
    #[serde(default)]
    pub token_usage: Option<TokenUsage>,
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub plan_mode: Option<bool>,
    #[serde(default)]
    pub mcp_status: Option<McpStatus>,
    /// What the step cost, when its model has prices. Not a member of the reference's event:
    /// never serialized here (nor into `wire.jsonl`); each front end shows it its own way, the
    /// wire only to a client that asked (`docs/compatibility.md`).
    #[serde(skip)]
    pub cost: Option<StepCost>,
}

/// The dollars of one model call, and the running sums it belongs to (US dollars).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepCost {
    /// This model call.
    pub step_usd: f64,
    /// The turn so far (every agent of the session, subagents included).
    pub turn_usd: f64,
    /// The session so far, across resumes.
    pub session_usd: f64,
}

impl StatusUpdate {
    /// Only the plan mode changed (`set_plan_mode`, `/plan`, a plan tool during a step).
    pub fn plan_mode(on: bool) -> Self {
        Self { plan_mode: Some(on), ..Self::default() }
    }

    /// The context's fill after `/clear` or `/compact`: `tokens` of `max` (0.0 when `max` is 0).
    pub fn context(tokens: u64, max: u64) -> Self {
        let usage = if max > 0 { tokens as f64 / max as f64 } else { 0.0 };
        Self {
            context_usage: Some(usage),
            context_tokens: Some(tokens),
            max_context_tokens: Some(max),
            ..Self::default()
        }
    }
}

/// MCP connection state, as reported while a turn waits for servers (`docs/protocol-1.10.md` §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpStatus {
    pub loading: bool,
    pub connected: u32,
    pub total: u32,
    pub tools: u32,
    pub servers: Vec<McpServerStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerStatus {
    pub name: String,
    pub status: McpServerState,
    pub tools: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    Pending,
    Connecting,
    Connected,
    Failed,
    Unauthorized,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(json: &str) {
        let v: StatusUpdate = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), json);
    }

    #[test]
    fn seven_members_round_trip_against_the_spec() {
        rt(
            r#"{"context_usage":0.00005,"context_tokens":5,"max_context_tokens":100000,"token_usage":{"input_other":5,"output":2,"input_cache_read":0,"input_cache_creation":0},"message_id":"scripted-1","plan_mode":false,"mcp_status":null}"#,
        );
        rt(
            r#"{"context_usage":0.0,"context_tokens":0,"max_context_tokens":100000,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null}"#,
        );
        rt(
            r#"{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":{"loading":true,"connected":0,"total":1,"tools":0,"servers":[{"name":"srv","status":"connecting","tools":[]}]}}"#,
        );
        rt(
            r#"{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":{"loading":false,"connected":1,"total":1,"tools":1,"servers":[{"name":"srv","status":"connected","tools":["t1"]}]}}"#,
        );
    }

    #[test]
    fn a_1_2_record_gains_the_new_members_as_null() {
        let v: StatusUpdate =
            serde_json::from_str(r#"{"context_usage":0.5,"token_usage":null,"message_id":"m"}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"context_usage":0.5,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":"m","plan_mode":null,"mcp_status":null}"#
        );
    }

    #[test]
    fn constructors_set_only_their_members() {
        assert_eq!(
            serde_json::to_string(&StatusUpdate::context(0, 0)).unwrap(),
            r#"{"context_usage":0.0,"context_tokens":0,"max_context_tokens":0,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null}"#
        );
        assert_eq!(StatusUpdate::plan_mode(true).plan_mode, Some(true));
        assert_eq!(StatusUpdate::context(1, 100000).context_usage, Some(1e-5));
    }

    #[test]
    fn bad_server_state_is_rejected() {
        assert!(serde_json::from_str::<McpServerState>(r#""sleeping""#).is_err());
    }

    #[test]
    fn usage_input_sums_cache() {
        let u = TokenUsage { input_other: 10, output: 5, input_cache_read: 3, input_cache_creation: 0 };
        assert_eq!(u.input(), 13);
        assert_eq!(u.total(), 18);
    }
}
