//! What an SDK program adds to a run through `initialize` and its flags (`docs/print-mode.md`
//! B.3a): in-process MCP servers (`super::sdk_mcp`), hook callbacks, subagent types, and the
//! `--json-schema` answer.
//!
//! Invariants: `initialize` is served once (a second one is refused); the host's servers are
//! connected and its hooks and agents registered before the answer goes out, so the first turn
//! sees them all; hooks are kiwi's own hook points (`crate::soul::hooks`) subscribed to by the
//! host, asked with `hook_callback` and failing open (an error, a wrong answer or no answer in
//! time allows); a `PreToolUse` hook's `allow` lets that one call run without any other
//! permission check (the allowance is keyed like approvals, by call id, tool and arguments, and
//! dropped when that call ends, so a later call that reuses the id is checked again), `deny` refuses it (the turn goes on), `ask` leaves it to the usual rules.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::control::HostAsk;
use super::lines::{AgentDefinitionIn, HookMatcherIn};
use super::sdk_mcp::SdkServer;
use crate::protocol::{HookAction, HookEvent, HookRequest};
use crate::soul::Agent;
use crate::soul::hooks::Subscription;
use crate::soul::subagent::SubagentDef;
use crate::tools::Toolset;

/// Seconds a hook callback may take when its matcher sets no `timeout` (Claude Code's default).
pub const DEFAULT_HOOK_TIMEOUT: u64 = 60;

/// The SDK's additions to one run.
pub struct Extras {
    pub host: HostAsk,
    pub servers: Vec<Arc<SdkServer>>,
    /// Tool calls a `PreToolUse` hook allowed: they run without another permission check.
    allowed_by_hook: HookAllowances,
    /// Seconds each hook callback may take, by callback id.
    hook_timeouts: Mutex<HashMap<String, u64>>,
    /// The names of the host's subagent types (`system/init.agents`).
    agents: Mutex<Vec<String>>,
    /// `--agents`, added at `initialize` (with the host's own) or before the first turn.
    flag_agents: Mutex<Option<BTreeMap<String, AgentDefinitionIn>>>,
    initialized: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Extras {
    pub fn new(host: HostAsk, servers: Vec<Arc<SdkServer>>) -> Self {
        Self {
            host,
            servers,
            allowed_by_hook: HookAllowances::default(),
            hook_timeouts: Mutex::default(),
            agents: Mutex::default(),
            flag_agents: Mutex::default(),
            initialized: AtomicBool::new(false),
        }
    }

    pub fn set_flag_agents(&self, agents: BTreeMap<String, AgentDefinitionIn>) {
        *lock(&self.flag_agents) = Some(agents);
    }

    /// Adds the `--agents` types if nothing has yet (a run without `initialize`).
    pub fn add_flag_agents(&self, agent: &Arc<Agent>) -> Vec<String> {
        let Some(agents) = lock(&self.flag_agents).take() else { return Vec::new() };
        self.add_agents(agent, agents).unwrap_or_else(|e| vec![e])
    }

    pub fn agent_names(&self) -> Vec<String> {
        lock(&self.agents).clone()
    }

    /// Whether a `PreToolUse` hook allowed this very call — same id, tool and arguments (asked
    /// once: the mark is used up).
    pub fn take_hook_allowance(&self, tool_call_id: &str, tool: &str, arguments: Option<&Value>) -> bool {
        self.allowed_by_hook.take(&HookAllowance::new(tool_call_id, tool, arguments))
    }

    /// The call `tool_call_id` ended: a hook's allowance for it that no approval used is dropped.
    pub fn call_ended(&self, tool_call_id: &str) {
        lock(&self.allowed_by_hook.0).retain(|a| a.tool_call_id != tool_call_id);
    }

    /// Serves `initialize`: connects the host's servers, subscribes its hooks and adds its
    /// agents. Returns warnings for what kiwi cannot serve (each is one stderr line).
    pub async fn initialize(
        &self,
        agent: &Arc<Agent>,
        hooks: Option<BTreeMap<String, Vec<HookMatcherIn>>>,
        agents: Option<BTreeMap<String, AgentDefinitionIn>>,
    ) -> Result<Vec<String>, String> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err("Already initialized".into());
        }
        let mut warnings = Vec::new();
        // Side by side, under one bound (one MCP call's timeout), so n silent servers cost the
        // host's `initialize` one timeout, not n (issue 30 item 10); a server still connecting
        // then is reported failed.
        let bound = self.servers.iter().map(|s| s.timeout()).max().unwrap_or_default();
        let connecting = self.servers.iter().map(|server| async move {
            let outcome = match tokio::time::timeout(bound, server.connect()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(server.give_up(format!("no handshake within {} s", bound.as_secs_f64()))),
            };
            (server, outcome)
        });
        for (server, outcome) in futures::future::join_all(connecting).await {
            match outcome {
                Ok(tools) => agent.update_toolset(|set| set.extend(tools)),
                Err(e) => warnings.push(format!("the SDK MCP server {} failed to connect: {e}", server.name)),
            }
        }
        let (subscriptions, unmapped) = subscriptions(hooks.unwrap_or_default());
        warnings.extend(unmapped);
        lock(&self.hook_timeouts).extend(subscriptions.iter().map(|s| (s.id.clone(), s.timeout)));
        if !subscriptions.is_empty() {
            agent.hooks.connect(subscriptions);
        }
        let mut all = lock(&self.flag_agents).take().unwrap_or_default();
        all.extend(agents.unwrap_or_default());
        if !all.is_empty() {
            warnings.extend(self.add_agents(agent, all)?);
        }
        Ok(warnings)
    }

    /// Adds subagent types defined by the host (`initialize.agents` or `--agents`).
    pub fn add_agents(
        &self,
        agent: &Arc<Agent>,
        defs: BTreeMap<String, AgentDefinitionIn>,
    ) -> Result<Vec<String>, String> {
        let (defs, warnings) = subagent_defs(agent, defs);
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        agent.subagents.add_types(defs.clone())?;
        // The `Agent` tool lists the types the model may choose.
        let mut types: Vec<crate::tools::agent::SubagentType> = agent
            .subagents
            .defs()
            .unwrap_or_default()
            .iter()
            .filter(|d| !names.contains(&d.name))
            .map(|d| crate::tools::agent::SubagentType { name: d.name.clone(), description: d.description.clone() })
            .collect();
        types.extend(
            defs.iter().map(|d| crate::tools::agent::SubagentType {
                name: d.name.clone(),
                description: d.description.clone(),
            }),
        );
        let tool: Arc<dyn crate::tools::Tool> =
            Arc::new(crate::tools::Typed::new(crate::tools::agent::AgentTool { types }));
        agent.update_toolset(|set| set.insert(tool));
        lock(&self.agents).extend(names);
        Ok(warnings)
    }

    /// Asks the host's callback of `request` (`hook_callback`) and turns its answer into the
    /// hook engine's verdict.
    /// Given up (the question withdrawn) when `stop` completes.
    pub async fn hook_callback(
        &self,
        request: &HookRequest,
        permission_mode: &str,
        transcript: &str,
        stop: impl std::future::Future<Output = ()>,
    ) -> HookVerdict {
        let timeout = lock(&self.hook_timeouts).get(&request.subscription_id).copied().unwrap_or(DEFAULT_HOOK_TIMEOUT);
        let input = hook_input(request, permission_mode, transcript);
        let tool_use_id = input.get("tool_use_id").cloned().unwrap_or(Value::Null);
        let ask = json!({
            "subtype": "hook_callback",
            "callback_id": request.subscription_id,
            "tool_use_id": tool_use_id,
            "input": input,
        });
        match self.host.ask_until(ask, Some(Duration::from_secs(timeout)), stop).await {
            Ok(answer) => verdict(&request.event, &request.target, &answer),
            Err(e) => {
                tracing::warn!("hook callback {} ({}): {e}; allowing", request.subscription_id, request.event);
                HookVerdict::Allow
            }
        }
    }

    /// Records a `PreToolUse` allow for the call.
    pub fn allow_call(&self, tool_call_id: &str, tool: &str, arguments: Option<&Value>) {
        lock(&self.allowed_by_hook.0).push(HookAllowance::new(tool_call_id, tool, arguments));
    }
}

/// The calls `PreToolUse` hooks allowed and no approval has used yet.
#[derive(Default)]
struct HookAllowances(Mutex<Vec<HookAllowance>>);

impl HookAllowances {
    fn take(&self, asking: &HookAllowance) -> bool {
        let mut allowed = lock(&self.0);
        let found = allowed.iter().position(|a| a == asking);
        found.map(|i| allowed.swap_remove(i)).is_some()
    }
}

/// One call a `PreToolUse` hook allowed: its id, tool and arguments (absent or not an object
/// counts as `{}`, as the hook saw it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HookAllowance {
    tool_call_id: String,
    tool: String,
    arguments: Value,
}

impl HookAllowance {
    fn new(tool_call_id: &str, tool: &str, arguments: Option<&Value>) -> Self {
        let arguments = match arguments {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => Value::Object(Map::new()),
        };
        Self { tool_call_id: tool_call_id.to_string(), tool: tool.to_string(), arguments }
    }
}

/// What a hook callback's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// No opinion (`{}`), or `ask`: the usual rules decide.
    Allow,
    /// `PreToolUse` `allow`: the call runs without any other permission check.
    AllowCall,
    /// Blocked, with the text the model reads.
    Block(String),
}

impl HookVerdict {
    pub fn action(&self) -> (HookAction, String) {
        match self {
            HookVerdict::Block(reason) => (HookAction::Block, reason.clone()),
            _ => (HookAction::Allow, String::new()),
        }
    }
}

/// The verdict of a hook's output for `event` at `target` (the tool, for tool events).
pub fn verdict(event: &str, target: &str, output: &Value) -> HookVerdict {
    let specific = output.get("hookSpecificOutput").unwrap_or(&Value::Null);
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    if event == "PreToolUse" {
        match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("deny") => {
                let reason = text(specific, "permissionDecisionReason");
                return HookVerdict::Block(format!("PreToolUse:{target} hook error: {reason}"));
            }
            Some("allow") => return HookVerdict::AllowCall,
            _ => {}
        }
    }
    if output.get("decision").and_then(Value::as_str) == Some("block") {
        let reason = text(output, "reason");
        return HookVerdict::Block(if reason.is_empty() { format!("{event} hook blocked this") } else { reason });
    }
    if output.get("continue").and_then(Value::as_bool) == Some(false) {
        let reason = text(output, "stopReason");
        return HookVerdict::Block(if reason.is_empty() { format!("{event} hook stopped this") } else { reason });
    }
    HookVerdict::Allow
}

/// The hook's input as Claude Code's callbacks read it: kiwi's members, renamed where Claude's
/// differ (`tool_use_id`, `tool_response`), with `permission_mode` and `transcript_path`.
pub fn hook_input(request: &HookRequest, permission_mode: &str, transcript: &str) -> Map<String, Value> {
    let mut input = request.input_data.clone();
    if let Some(id) = input.remove("tool_call_id") {
        input.insert("tool_use_id".into(), id);
    }
    if let Some(output) = input.remove("tool_output") {
        input.insert("tool_response".into(), output);
    }
    input.insert("permission_mode".into(), Value::from(permission_mode));
    input.insert("transcript_path".into(), Value::from(transcript));
    input.entry("hook_event_name").or_insert_with(|| Value::from(request.event.clone()));
    input
}

/// One subscription per callback id; events kiwi has no hook point for are named in warnings.
pub fn subscriptions(hooks: BTreeMap<String, Vec<HookMatcherIn>>) -> (Vec<Subscription>, Vec<String>) {
    let mut subs = Vec::new();
    let mut warnings = Vec::new();
    for (event_name, matchers) in hooks {
        let Some(event) = HookEvent::parse(&event_name) else {
            warnings.push(format!("kiwi has no {event_name} hook point: those hook callbacks are never called"));
            continue;
        };
        for matcher in matchers {
            let timeout =
                matcher.timeout.filter(|t| t.is_finite() && *t > 0.0).map_or(DEFAULT_HOOK_TIMEOUT, |t| t.ceil() as u64);
            for id in matcher.hook_callback_ids {
                subs.push(Subscription { id, event, matcher: matcher.matcher.clone().unwrap_or_default(), timeout });
            }
        }
    }
    (subs, warnings)
}

/// The config's model alias an agent definition's `model` names (`docs/print-mode.md`, "Agents"):
/// `inherit` is the session's model (`None`); a key of the config's `models` is that model; else
/// the one model whose key or API name equals it, or — for Claude's family aliases `sonnet`,
/// `opus`, `haiku` — contains it. No match or more than one: `Err` says why.
pub fn subagent_model(
    models: &BTreeMap<String, crate::config::schema::ModelConfig>,
    wanted: &str,
) -> Result<Option<String>, String> {
    if wanted == "inherit" {
        return Ok(None);
    }
    if models.contains_key(wanted) {
        return Ok(Some(wanted.to_string()));
    }
    let lower = wanted.to_ascii_lowercase();
    let family = ["sonnet", "opus", "haiku"].contains(&lower.as_str());
    let matches: Vec<&String> = models
        .iter()
        .filter(|(key, m)| {
            let (key, api) = (key.to_ascii_lowercase(), m.model.to_ascii_lowercase());
            api == lower || (family && (key.contains(&lower) || api.contains(&lower)))
        })
        .map(|(key, _)| key)
        .collect();
    match matches.as_slice() {
        [one] => Ok(Some((*one).clone())),
        [] => Err(format!("model {wanted:?} matches none of the config's models")),
        many => Err(format!(
            "model {wanted:?} matches more than one of the config's models ({})",
            many.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The host's subagent types: the definition's prompt as system prompt, its tools (Claude's
/// names or kiwi's) taken from the session's, never the `Agent` tool (subagents do not nest).
fn subagent_defs(agent: &Agent, defs: BTreeMap<String, AgentDefinitionIn>) -> (Vec<SubagentDef>, Vec<String>) {
    let all = agent.toolset();
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    for (name, def) in defs {
        let wanted: Option<Vec<String>> =
            def.tools.as_ref().map(|t| t.iter().map(|n| super::tool_names::kiwi_name(n).to_string()).collect());
        let denied: Vec<String> =
            def.disallowed_tools.iter().flatten().map(|n| super::tool_names::kiwi_name(n).to_string()).collect();
        let mut tools = Vec::new();
        for tool_name in all.names() {
            let offered = wanted.as_ref().is_none_or(|w| w.iter().any(|n| n == tool_name));
            if offered
                && tool_name != "Agent"
                && !denied.iter().any(|d| d == tool_name)
                && let Some(tool) = all.get(tool_name)
            {
                tools.push(tool.clone());
            }
        }
        for unknown in wanted.iter().flatten().filter(|n| all.get(n).is_none() && *n != "Agent") {
            warnings.push(format!("agent {name}: no kiwi tool is called {unknown:?}; it is not offered"));
        }
        let model = match def.model.as_deref() {
            None => None,
            Some(wanted) => subagent_model(&agent.env.config.models, wanted).unwrap_or_else(|why| {
                warnings.push(format!("agent {name}: {why}; it runs on the session's model"));
                None
            }),
        };
        out.push(SubagentDef {
            name,
            description: def.description,
            system_prompt: def.prompt.into(),
            toolset: Arc::new(Toolset::new(tools)),
            model,
        });
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_allowance_is_for_one_call_only() {
        let allowed = HookAllowances::default();
        let args = json!({"command": "ls"});
        lock(&allowed.0).push(HookAllowance::new("c1", "Shell", Some(&args)));
        assert!(!allowed.take(&HookAllowance::new("c1", "Shell", Some(&json!({"command": "rm -rf ~"})))));
        assert!(!allowed.take(&HookAllowance::new("c1", "WriteFile", Some(&args))));
        assert!(!allowed.take(&HookAllowance::new("c2", "Shell", Some(&args))));
        assert!(allowed.take(&HookAllowance::new("c1", "Shell", Some(&args))));
        assert!(!allowed.take(&HookAllowance::new("c1", "Shell", Some(&args))), "used up");
        lock(&allowed.0).push(HookAllowance::new("c3", "ReadFile", None));
        assert!(allowed.take(&HookAllowance::new("c3", "ReadFile", Some(&json!("not an object")))));
    }

    #[test]
    fn pre_tool_use_decisions() {
        let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": "no rm"}});
        assert_eq!(
            verdict("PreToolUse", "Shell", &deny),
            HookVerdict::Block("PreToolUse:Shell hook error: no rm".into())
        );
        let allow = json!({"hookSpecificOutput": {"permissionDecision": "allow"}});
        assert_eq!(verdict("PreToolUse", "Shell", &allow), HookVerdict::AllowCall);
        let ask = json!({"hookSpecificOutput": {"permissionDecision": "ask"}});
        assert_eq!(verdict("PreToolUse", "Shell", &ask), HookVerdict::Allow);
        assert_eq!(verdict("PreToolUse", "Shell", &json!({})), HookVerdict::Allow);
        assert_eq!(
            verdict("UserPromptSubmit", "", &json!({"decision": "block", "reason": "not that"})),
            HookVerdict::Block("not that".into())
        );
        assert!(matches!(verdict("Stop", "", &json!({"continue": false})), HookVerdict::Block(_)));
        // Only PreToolUse takes permission decisions.
        assert_eq!(verdict("PostToolUse", "Shell", &allow), HookVerdict::Allow);
    }

    #[test]
    fn matchers_become_subscriptions() {
        let hooks: BTreeMap<String, Vec<HookMatcherIn>> = serde_json::from_value(json!({
            "PreToolUse": [{"matcher": "Bash|Shell", "hookCallbackIds": ["hook_0", "hook_1"], "timeout": 2.5}],
            "PostToolUse": [{"matcher": null, "hookCallbackIds": ["hook_2"]}],
            "PermissionRequest": [{"matcher": null, "hookCallbackIds": ["hook_3"]}]
        }))
        .unwrap();
        let (subs, warnings) = subscriptions(hooks);
        let ids: Vec<(&str, u64, &str)> = subs.iter().map(|s| (s.id.as_str(), s.timeout, s.matcher.as_str())).collect();
        assert_eq!(ids, [("hook_2", 60, ""), ("hook_0", 3, "Bash|Shell"), ("hook_1", 3, "Bash|Shell")]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("PermissionRequest"), "{warnings:?}");
    }

    #[test]
    fn agent_models_map_onto_the_configs() {
        let model = |api: &str| crate::config::schema::ModelConfig {
            provider: "p".into(),
            model: api.into(),
            max_context_size: 1000,
            capabilities: Vec::new(),
            display_name: None,
            usd_per_mtok: None,
        };
        let models: BTreeMap<String, _> = [
            ("fast".to_string(), model("claude-haiku-4-5")),
            ("big".to_string(), model("claude-opus-4-5")),
            ("opus-alt".to_string(), model("other")),
            ("k2".to_string(), model("kimi-k2")),
        ]
        .into();
        assert_eq!(subagent_model(&models, "inherit"), Ok(None));
        assert_eq!(subagent_model(&models, "k2"), Ok(Some("k2".into())));
        assert_eq!(subagent_model(&models, "kimi-k2"), Ok(Some("k2".into())));
        assert_eq!(subagent_model(&models, "haiku"), Ok(Some("fast".into())));
        assert_eq!(subagent_model(&models, "claude-haiku-4-5"), Ok(Some("fast".into())));
        let ambiguous = subagent_model(&models, "opus").unwrap_err();
        assert!(ambiguous.contains("big, opus-alt"), "{ambiguous}");
        let none = subagent_model(&models, "sonnet").unwrap_err();
        assert!(none.contains("matches none"), "{none}");
        // Only the family aliases match by part of a name.
        assert!(subagent_model(&models, "kimi").is_err());
    }

    #[test]
    fn inputs_use_claudes_names() {
        let request = HookRequest {
            id: "x".into(),
            subscription_id: "hook_0".into(),
            event: "PostToolUse".into(),
            target: "Shell".into(),
            input_data: crate::soul::hooks::input([
                ("hook_event_name", Value::from("PostToolUse")),
                ("tool_name", Value::from("Shell")),
                ("tool_call_id", Value::from("c1")),
                ("tool_output", Value::from("hi")),
            ]),
        };
        let input = hook_input(&request, "default", "/t");
        assert_eq!(input["tool_use_id"], "c1");
        assert_eq!(input["tool_response"], "hi");
        assert_eq!(input["permission_mode"], "default");
        assert!(input.get("tool_call_id").is_none());
    }
}
