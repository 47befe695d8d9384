//! One foreground run of a subagent instance for an `Agent` call (`docs/protocol-1.10.md` §8.2): pick or
//! restore the instance, run the prompt as a nested turn of a soul of its own, ask once more for
//! a fuller summary when the answer is short, and turn the outcome into the tool result.
//!
//! Invariants: the run is a future inside the parent's tool call, so cancelling the parent's
//! turn drops it — its tools' processes die with their calls, no model call follows, and its
//! pending approvals are rejected with the parent's turn (they are owned by it); the instance's
//! files are written before the model is first called; an instance never runs twice at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::git_context;
use super::wrap::WrapProjection;
use super::{RunClaim, SubagentDef, SubagentRole, is_agent_id, new_agent_id};
use crate::agent_env::AgentEnv;
use crate::blueprint::prompts::SUBAGENT_ELABORATE;
use crate::llm::Role;
use crate::protocol::{ApprovalSource, HookEvent, ToolReturnValue, UserInput};
use crate::session::context_prompt;
use crate::session::wire_log::WireLog;
use crate::soul::hooks::{self, HookRunner};
use crate::soul::turn::AgentRun;
use crate::soul::{Agent, Context, EventSink, Soul, TurnError};
use crate::tools::Delegation;

/// A final answer shorter than this gets one "elaborate" round.
const SHORT_SUMMARY_CHARS: usize = 200;

/// `meta.json` of an instance.
#[derive(Debug, Serialize, Deserialize)]
pub struct Meta {
    pub agent_id: String,
    pub subagent_type: String,
    pub description: String,
}

/// An instance ready to run: its soul, its folder, and its claim.
pub struct Instance {
    pub agent_id: String,
    pub subagent_type: String,
    pub resumed: bool,
    pub dir: PathBuf,
    pub soul: Soul,
    _claim: RunClaim,
}

/// The error result of an `Agent` call that could not run (boxed: results are large).
pub type Failure = Box<ToolReturnValue>;

pub fn failed(message: impl Into<String>) -> Failure {
    Box::new(ToolReturnValue::error(message, "Agent failed"))
}

/// Opens the instance `d` asks for (new, or `d.resume`) for a run as `role_of(agent_id, type)`.
pub fn open_instance(
    parent: &Arc<Agent>,
    d: &Delegation,
    role_of: impl FnOnce(&str, &str) -> SubagentRole,
) -> Result<Instance, Failure> {
    let subagents = &parent.subagents;
    let (agent_id, subagent_type, resumed) = match &d.resume {
        Some(id) => {
            let meta = is_agent_id(id)
                .then(|| read_meta(&instance_dir(parent, id)))
                .flatten()
                .ok_or_else(|| failed(format!("Agent instance not found: {id}")))?;
            (meta.agent_id, meta.subagent_type, true)
        }
        None => (new_agent_id(), d.subagent_type.clone(), false),
    };
    let def: &SubagentDef = subagents
        .def(&subagent_type)
        .map_err(|e| failed(format!("Failed to run agent: {e}")))?
        .ok_or_else(|| failed(format!("Failed to run agent: 'Builtin subagent type not found: {subagent_type}'")))?;
    // The call's model first, then the type's own (a host-defined type may name one).
    let env = match d.model.as_ref().or(def.model.as_ref()) {
        Some(alias) => env_for_model(parent, alias)?,
        None => parent.env.clone(),
    };
    let claim = subagents.claim(&agent_id).map_err(|status| {
        failed(format!("Agent instance {agent_id} is still {status} and cannot be resumed concurrently."))
    })?;
    let dir = instance_dir(parent, &agent_id);
    let io = |e: std::io::Error| failed(format!("Failed to run agent: cannot write {}: {e}", dir.display()));
    std::fs::create_dir_all(&dir).map_err(io)?;
    if !resumed {
        let meta = Meta {
            agent_id: agent_id.clone(),
            subagent_type: subagent_type.clone(),
            description: d.description.clone(),
        };
        std::fs::write(dir.join("meta.json"), serde_json::to_vec_pretty(&meta).unwrap_or_default()).map_err(io)?;
    }
    std::fs::write(dir.join("prompt.txt"), &d.prompt).map_err(io)?;
    let context_path = dir.join("context.jsonl");
    // A fresh folder's file is started plainly (no temp file and fsync, which would cost the
    // start-up milliseconds; a lost instance folder only loses a resumable run).
    let ensured = if resumed {
        context_prompt::ensure(&context_path, &def.system_prompt).map_err(io)?
    } else {
        let file = context_prompt::start(&context_path, &def.system_prompt, false).map_err(io)?;
        context_prompt::Ensured { prompt: def.system_prompt.to_string(), fresh: Some(file) }
    };
    let system_prompt = ensured.prompt;
    let context = match ensured.fresh {
        Some(file) => Context::fresh(&context_path, file),
        None => Context::restore(&context_path).map_err(io)?,
    };
    let agent = Arc::new(Agent::for_subagent(parent, def, system_prompt, env));
    let mut soul = Soul::new(agent, context);
    soul.subagent = Some(role_of(&agent_id, &subagent_type));
    Ok(Instance { agent_id, subagent_type, resumed, dir, soul, _claim: claim })
}

fn instance_dir(parent: &Agent, agent_id: &str) -> PathBuf {
    parent.env.session_dir.join("subagents").join(agent_id)
}

fn read_meta(dir: &Path) -> Option<Meta> {
    serde_json::from_slice(&std::fs::read(dir.join("meta.json")).ok()?).ok()
}

/// The environment a run on the model `alias` uses: the session's own when that is the model
/// in use, else one with its own provider (built at the first such run, checked before any file
/// of the instance is written).
fn env_for_model(parent: &Agent, alias: &str) -> Result<Arc<AgentEnv>, Failure> {
    let models = &parent.env.config.models;
    let Some(wanted) = models.get(alias) else {
        return Err(failed(format!("Unknown model alias: {alias}")));
    };
    // Another alias of the same provider and model is the same model: it shares the session's
    // provider (and so a scripted FIFO, as every LLM call of a process does).
    let current = parent.env.model.get().key.clone();
    let same = current.as_deref().and_then(|k| models.get(k)).is_some_and(|m| {
        current.as_deref() == Some(alias) || (m.provider == wanted.provider && m.model == wanted.model)
    });
    if same {
        return Ok(parent.env.clone());
    }
    parent.subagents.env_with_model(&parent.env, alias).map_err(|e| {
        tracing::warn!("subagent model {alias}: {e}");
        failed(format!("Failed to run agent: cannot use model {alias}: {e}"))
    })
}

/// Runs a foreground instance for the call, its events wrapped onto `parent_sink`.
pub async fn run_foreground(
    parent: &Arc<Agent>,
    d: Delegation,
    parent_sink: &EventSink,
    owner: &str,
) -> ToolReturnValue {
    let role_of = |agent_id: &str, subagent_type: &str| SubagentRole {
        agent_id: agent_id.to_string(),
        subagent_type: subagent_type.to_string(),
        source_kind: ApprovalSource::ForegroundTurn,
        source_id: None,
        owner: owner.to_string(),
    };
    let mut instance = match open_instance(parent, &d, role_of) {
        Ok(i) => i,
        Err(result) => return *result,
    };
    let wrap = WrapProjection::new(parent_sink.clone(), &d.tool_call_id, &instance.agent_id, &instance.subagent_type);
    let sink = EventSink::new(Arc::new(wrap), Some(WireLog::new(&instance.dir.join("wire.jsonl"))));
    let parent_hooks = hook_runner(parent, parent_sink);
    let start = hooks::input([
        ("agent_name", Value::from(instance.subagent_type.clone())),
        ("prompt", Value::from(d.prompt.chars().take(500).collect::<String>())),
    ]);
    parent_hooks.fire(HookEvent::SubagentStart, &instance.subagent_type, start).await;
    let work = run_to_summary(&mut instance.soul, &d.prompt, &sink);
    let outcome = match d.timeout {
        Some(t) => match tokio::time::timeout(Duration::from_secs(t), work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(failed(format!("Agent timed out after {t}s."))),
        },
        None => work.await,
    };
    sink.flush_record();
    let summary = match outcome {
        Ok(summary) => summary,
        Err(result) => return *result,
    };
    let _ = std::fs::write(instance.dir.join("output"), &summary);
    let stop = hooks::input([
        ("agent_name", Value::from(instance.subagent_type.clone())),
        ("response", Value::from(summary.chars().take(500).collect::<String>())),
    ]);
    parent_hooks.fire(HookEvent::SubagentStop, &instance.subagent_type, stop).await;
    if parent.subagents.final_text_only() {
        return ToolReturnValue::ok(summary, "");
    }
    ToolReturnValue::ok(result_text(&instance, &d.subagent_type, "completed", &summary), "")
}

/// The tool output of a finished run (`docs/protocol-1.10.md` §8.2).
pub fn result_text(instance: &Instance, requested_type: &str, status: &str, summary: &str) -> String {
    let mut lines = vec![format!("agent_id: {}", instance.agent_id), format!("resumed: {}", instance.resumed)];
    if instance.resumed && requested_type != instance.subagent_type {
        lines.push(format!("requested_subagent_type: {requested_type}"));
    }
    lines.push(format!("actual_subagent_type: {}", instance.subagent_type));
    lines.push(format!("status: {status}"));
    lines.push(String::new());
    lines.push("[summary]".into());
    lines.push(summary.to_string());
    lines.join("\n")
}

fn hook_runner(agent: &Agent, sink: &EventSink) -> HookRunner {
    HookRunner::new(agent.hooks.clone(), sink.clone(), &agent.env.session_id, agent.env.work_dir.clone())
}

/// Runs the prompt, and (kimi's rule, not the Claude dialect's) the elaborate round when the
/// answer is short; the final summary.
pub async fn run_to_summary(soul: &mut Soul, prompt: &str, sink: &EventSink) -> Result<String, Failure> {
    let subagent_type = soul.subagent.as_ref().map(|r| r.subagent_type.as_str()).unwrap_or_default();
    let prompt = git_context::prompt_with_context(subagent_type, &soul.agent.env.work_dir, prompt).await;
    let run = soul.run_nested(&prompt, sink).await;
    let summary = summary_of(soul, run, "running agent")?;
    if summary.chars().count() >= SHORT_SUMMARY_CHARS || soul.agent.subagents.final_text_only() {
        return Ok(summary);
    }
    let run = soul.run_nested(SUBAGENT_ELABORATE.trim(), sink).await;
    summary_of(soul, run, "continuing the agent summary")
}

/// The last assistant message's text, or the error result of the run.
fn summary_of(soul: &Soul, run: Result<AgentRun, TurnError>, phase: &str) -> Result<String, Failure> {
    match run {
        Ok(AgentRun::MaxSteps { steps }) => {
            return Err(Box::new(ToolReturnValue::error(
                format!("Max steps {steps} reached when {phase}. Please try splitting the task into smaller subtasks."),
                "Max steps reached",
            )));
        }
        Ok(AgentRun::TokenBudget { used, limit, .. }) => {
            return Err(Box::new(ToolReturnValue::error(
                format!("The session's token budget is used up ({used} of {limit} tokens) when {phase}."),
                "Token budget used up",
            )));
        }
        Ok(AgentRun::CostBudget { spent, limit, .. }) => {
            let (spent, limit) = (crate::config::prices::dollars(spent), crate::config::prices::dollars(limit));
            return Err(Box::new(ToolReturnValue::error(
                format!("The session's dollar budget is used up ({spent} of {limit}) when {phase}."),
                "Dollar budget used up",
            )));
        }
        Ok(AgentRun::Done { .. }) => {}
        Err(TurnError::Provider(e)) => {
            return Err(failed(match e.status_code() {
                Some(code) => format!("LLM API error (HTTP {code}) when {phase}: {e}"),
                None => format!("LLM provider error when {phase}: {e}"),
            }));
        }
        Err(e) => return Err(failed(format!("Failed to run agent: {e}"))),
    }
    let last = soul.context.history().last().filter(|m| m.role == Role::Assistant);
    let text = last.map(|m| m.content.iter().filter_map(|p| p.as_text()).collect::<Vec<_>>().join("\n"));
    match text {
        Some(text) if !text.trim().is_empty() => Ok(text),
        _ => Err(failed("The agent did not produce a valid assistant response.")),
    }
}

impl Soul {
    /// A subagent's turn: `UserPromptSubmit` hooks, `TurnBegin`, the agent run (and the `Stop`
    /// hooks' one re-run), `TurnEnd`. No slash commands and no session title: the prompt comes
    /// from the parent model, not the user.
    pub async fn run_nested(&mut self, prompt: &str, sink: &EventSink) -> Result<AgentRun, TurnError> {
        self.turn = Arc::new(crate::soul::turn_shared::TurnShared::new());
        let submitted = self
            .hooks(sink)
            .run(HookEvent::UserPromptSubmit, prompt, hooks::input([("prompt", Value::from(prompt))]))
            .await;
        let input = UserInput::Text(prompt.to_string());
        sink.emit(crate::protocol::Event::TurnBegin { user_input: input.clone() }).await;
        let result = if submitted.blocked {
            let reason = if submitted.reason.is_empty() { "Prompt blocked by hook.".into() } else { submitted.reason };
            sink.emit(crate::protocol::Event::ContentPart(crate::protocol::ContentPart::text(reason))).await;
            Ok(AgentRun::Done { steps: 0, rejected: false, stop: None })
        } else {
            self.agent_run_with_stop_hooks(input.to_parts(), sink).await
        };
        sink.emit(crate::protocol::Event::TurnEnd {}).await;
        result
    }
}
