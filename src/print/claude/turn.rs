//! One turn's events as Claude lines (`docs/print-mode.md` C.2): blocks assembled from the core's
//! unmerged fragments, one `assistant` line per block, `user` lines for tool results, partial
//! `stream_event`s, and the turn's `result`. Pure: events in, lines out, so it is tested without
//! a process.
//!
//! Invariants: a block is a run of the step assembler (`protocol::assembly`): it closes when a
//! fragment that does not continue it, any other event, an approval request or the step's end
//! arrives (argument fragments with no call open no block); closed blocks wait for the step's
//! usage (the `StatusUpdate` that follows the model's stream) so each assistant line carries it,
//! and are flushed at the latest before anything that follows the stream (tool results,
//! approvals, the step's end); every stream event of a block comes before the block's assistant
//! line.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lines::{
    AssistantLine, AssistantMessage, Block, CompactBoundaryLine, CompactMetadata, Delta, ImageSource, MessageDeltaBody,
    ModelUsage, OutLine, OutputUsage, PermissionDenial, ResultLine, ResultSubtype, StreamEvent, StreamEventLine,
    SystemLine, TaskNotificationLine, TaskProgressLine, TaskStartedLine, TaskUpdatedLine, TaskUsage, ToolResultContent,
    ToolUseResult, Usage, UserContent, UserLine, UserMessage, error_class,
};
use crate::llm::{ChatError, ModelStop};
use crate::protocol::assembly::is_fragment;
use crate::protocol::{ContentPart, Event, Fed, Run, RunAssembler, SubagentEvent, TokenUsage, ToolOutput, ToolResult};
use crate::soul::{TurnError, TurnOutcome, TurnResult};

/// A fresh UUID v4, as every message line carries.
pub fn fresh_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn fresh_message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// What every line of a run shares.
#[derive(Debug, Clone)]
pub struct Identity {
    pub session_id: String,
    pub model: String,
    /// The model's context window (for `modelUsage`).
    pub context_window: u64,
}

/// One model call (a step).
#[derive(Debug)]
struct Step {
    message_id: String,
    /// Index of the next content block (stream events).
    next_index: u32,
    /// The block being streamed, merged by the step assembler.
    runs: RunAssembler,
    /// Closed blocks waiting for the step's usage.
    closed: Vec<Block>,
    usage: Option<Usage>,
    has_tool_calls: bool,
    started: Instant,
    /// Set when the model's stream is over (usage reported).
    streamed: Option<Instant>,
    text: String,
}

/// The lines of one turn, built as its events arrive.
pub struct TurnLines {
    id: Identity,
    partial: bool,
    started: Instant,
    step: Option<Step>,
    num_turns: u32,
    usage: Usage,
    api_time: Duration,
    /// Text of the last finished step (the success `result`).
    last_text: String,
    denials: Vec<PermissionDenial>,
    /// Deny messages by tool call id: their results show the message itself.
    denied: HashMap<String, String>,
    /// Parsed inputs of this turn's tool calls (for `can_use_tool` and denials).
    inputs: HashMap<String, (String, Value)>,
    manual_compaction: bool,
    /// Totals over the whole process, by model.
    model_usage: BTreeMap<String, ModelUsage>,
    /// The tasks of this turn and the background ones still running, by the call that started
    /// each (`Agent`, or `Shell` for a background command).
    tasks: HashMap<String, Task>,
    /// Background tasks announced since the projection last looked: (call id, task id).
    started_background: Vec<(String, String)>,
}

/// A task: a subagent run for an `Agent` call, its lines carrying the call's id, or a background
/// shell command (`docs/print-mode.md` B.3a).
#[derive(Debug)]
struct Task {
    task_id: String,
    /// The subagent's (empty for a shell command).
    agent_id: String,
    subagent_type: String,
    description: String,
    message_id: String,
    started: Instant,
    tool_uses: u64,
    tokens: u64,
    ended: bool,
    /// Runs on after its call returned: ended by [`TurnLines::end_background`].
    background: bool,
    task_type: &'static str,
    /// Its `system/task_started` is out.
    announced: bool,
}

impl Task {
    /// A task that starts now, not yet announced.
    fn new(task_id: String, task_type: &'static str, description: String, background: bool) -> Self {
        Task {
            task_id,
            agent_id: String::new(),
            subagent_type: String::new(),
            description,
            message_id: String::new(),
            started: Instant::now(),
            tool_uses: 0,
            tokens: 0,
            ended: false,
            background,
            task_type,
            announced: false,
        }
    }
}

/// Claude's `task_type` of a subagent run.
pub const LOCAL_AGENT: &str = "local_agent";
/// Claude's `task_type` of a background shell command.
pub const LOCAL_BASH: &str = "local_bash";

/// A background subagent's task, as the session's task manager knows it.
#[derive(Debug, Clone)]
pub struct BackgroundRef {
    pub task_id: String,
    pub description: String,
}

/// How a background task ended: the `task_updated` status (`completed`, `failed`, `killed`) and
/// the `task_notification` one (`completed`, `failed`, `stopped`).
#[derive(Debug, Clone)]
pub struct TaskEnding {
    pub updated: &'static str,
    pub notified: &'static str,
    pub output_file: String,
}

impl TurnLines {
    pub fn new(id: Identity, partial: bool) -> Self {
        Self {
            id,
            partial,
            started: Instant::now(),
            step: None,
            num_turns: 0,
            usage: Usage::default(),
            api_time: Duration::ZERO,
            last_text: String::new(),
            denials: Vec::new(),
            denied: HashMap::new(),
            inputs: HashMap::new(),
            manual_compaction: false,
            model_usage: BTreeMap::new(),
            tasks: HashMap::new(),
            started_background: Vec::new(),
        }
    }

    pub fn identity(&self) -> &Identity {
        &self.id
    }

    /// The model the next turn's lines name.
    pub fn set_model(&mut self, model: String, context_window: u64) {
        self.id.model = model;
        self.id.context_window = context_window;
    }

    /// Starts a new turn (`TurnBegin`); process-wide totals are kept.
    pub fn begin(&mut self, user_input_text: &str) {
        let model_usage = std::mem::take(&mut self.model_usage);
        // Background tasks outlive the turn that started them.
        let mut tasks = std::mem::take(&mut self.tasks);
        tasks.retain(|_, t| t.background && !t.ended);
        let started_background = std::mem::take(&mut self.started_background);
        *self = Self { model_usage, tasks, started_background, ..Self::new(self.id.clone(), self.partial) };
        self.manual_compaction = user_input_text.trim_start().starts_with("/compact");
    }

    /// The model's name and arguments of a tool call of this turn.
    pub fn tool_input(&self, tool_call_id: &str) -> Option<&(String, Value)> {
        self.inputs.get(tool_call_id)
    }

    /// Records a denial: listed in `permission_denials`, and its result shows `message`.
    pub fn deny(&mut self, tool_name: &str, tool_call_id: &str, message: &str) {
        let input =
            self.inputs.get(tool_call_id).map(|(_, v)| v.clone()).unwrap_or_else(|| Value::Object(Default::default()));
        self.denials.push(PermissionDenial {
            tool_name: tool_name.to_string(),
            tool_use_id: tool_call_id.to_string(),
            tool_input: input,
        });
        self.denied.insert(tool_call_id.to_string(), message.to_string());
    }

    fn stream_line(&self, event: StreamEvent) -> OutLine {
        OutLine::StreamEvent(StreamEventLine {
            event,
            parent_tool_use_id: None,
            session_id: self.id.session_id.clone(),
            uuid: fresh_uuid(),
        })
    }

    fn partial_line(&self, out: &mut Vec<OutLine>, event: StreamEvent) {
        if self.partial {
            out.push(self.stream_line(event));
        }
    }

    fn assistant_message(&self, id: &str, content: Vec<Block>, usage: Usage) -> AssistantMessage {
        AssistantMessage {
            id: id.to_string(),
            kind: "message".into(),
            role: "assistant".into(),
            model: self.id.model.clone(),
            content,
            stop_reason: None,
            stop_sequence: None,
            usage,
        }
    }

    /// Maps one event; lines are appended to `out` in order.
    pub fn event(&mut self, event: &Event, out: &mut Vec<OutLine>) {
        if is_fragment(event) {
            return self.fragment(event, out);
        }
        // Any other event ends the block being streamed.
        self.close_block(out);
        match event {
            Event::StepBegin { .. } => {
                self.end_step(out);
                self.num_turns += 1;
                let step = Step {
                    message_id: fresh_message_id(),
                    next_index: 0,
                    runs: RunAssembler::default(),
                    closed: Vec::new(),
                    usage: None,
                    has_tool_calls: false,
                    started: Instant::now(),
                    streamed: None,
                    text: String::new(),
                };
                if self.partial {
                    let message = self.assistant_message(&step.message_id, Vec::new(), Usage::default());
                    out.push(self.stream_line(StreamEvent::MessageStart { message }));
                }
                self.step = Some(step);
            }
            Event::StatusUpdate(status) => {
                if let Some(step) = &mut self.step {
                    if step.streamed.is_none() {
                        step.streamed = Some(Instant::now());
                    }
                    if let Some(usage) = status.token_usage {
                        let usage = anthropic_usage(usage);
                        step.usage = Some(usage);
                        self.usage.add(usage);
                        let totals = self.model_usage.entry(self.id.model.clone()).or_default();
                        totals.input_tokens += usage.input_tokens;
                        totals.output_tokens += usage.output_tokens;
                        totals.cache_read_input_tokens += usage.cache_read_input_tokens;
                        totals.cache_creation_input_tokens += usage.cache_creation_input_tokens;
                        totals.context_window = self.id.context_window;
                        if let Some(cost) = status.cost {
                            totals.cost_usd = crate::config::prices::round_usd(totals.cost_usd + cost.step_usd);
                        }
                    } else if step.usage.is_none() {
                        step.usage = Some(Usage::default());
                    }
                }
                self.flush_blocks(out);
            }
            Event::ToolResult(result) => {
                self.flush(out);
                out.push(self.tool_result_line(result, None));
                let failed = result.return_value.is_error;
                self.end_task(&result.tool_call_id, if failed { "failed" } else { "completed" }, out);
                self.background_start(result);
                self.task_lines(&result.tool_call_id, out);
            }
            Event::SubagentEvent(inner) => self.subagent(inner, None, out),
            Event::StepInterrupted {} | Event::TurnEnd {} => self.end_step(out),
            Event::StepRetry(retry) => out.push(super::retry::api_retry_line(retry, &self.id.session_id)),
            Event::CompactionEnd {} => {
                let trigger = if self.manual_compaction { "manual" } else { "auto" };
                out.push(OutLine::System(SystemLine::CompactBoundary(CompactBoundaryLine {
                    compact_metadata: CompactMetadata { trigger: trigger.into(), pre_tokens: 0 },
                    session_id: self.id.session_id.clone(),
                    uuid: fresh_uuid(),
                })));
            }
            // TurnBegin is the projection's (it writes `system/init`); sub-agent events, approval
            // answers, compaction starts and events added by later protocol versions have no
            // Claude line.
            other => tracing::debug!("no Claude line for {}", event_name(other)),
        }
    }

    /// A fragment: it continues the open block or closes it and opens its own; its deltas follow.
    fn fragment(&mut self, event: &Event, out: &mut Vec<OutLine>) {
        if self.step.is_none() {
            // Content outside a step (never from the core today): give it a message of its own.
            self.event(&Event::StepBegin { n: 0 }, out);
            self.num_turns = self.num_turns.saturating_sub(1);
        }
        let Some(step) = &mut self.step else { return };
        match step.runs.push(event) {
            Fed::Continued => {}
            Fed::Opened(closed) | Fed::Other(closed) => {
                self.close_run(closed, out);
                self.open_block(out);
            }
        }
        if self.partial {
            self.deltas(event, out);
        }
    }

    /// The stream events of one fragment (`--include-partial-messages`).
    fn deltas(&self, event: &Event, out: &mut Vec<OutLine>) {
        let index = self.open_index();
        let mut delta = |delta: Delta| out.push(self.stream_line(StreamEvent::ContentBlockDelta { index, delta }));
        match event {
            Event::ContentPart(ContentPart::Text { text }) => delta(Delta::TextDelta { text: text.clone() }),
            Event::ContentPart(ContentPart::Think { think, encrypted }) => {
                if !think.is_empty() {
                    delta(Delta::ThinkingDelta { thinking: think.clone() });
                }
                if let Some(e) = encrypted {
                    delta(Delta::SignatureDelta { signature: e.clone() });
                }
            }
            Event::ContentPart(media) => delta(Delta::TextDelta { text: media_name(media).into() }),
            Event::ToolCall(call) => {
                if let Some(arguments) = call.function.arguments.as_deref().filter(|a| !a.is_empty()) {
                    delta(Delta::InputJsonDelta { partial_json: arguments.into() });
                }
            }
            Event::ToolCallPart(part) => {
                let in_call = matches!(self.step.as_ref().and_then(|s| s.runs.open()), Some(Run::Call(_)));
                if let Some(fragment) = part.arguments_part.as_deref().filter(|a| in_call && !a.is_empty()) {
                    delta(Delta::InputJsonDelta { partial_json: fragment.into() });
                }
            }
            _ => {}
        }
    }

    fn open_index(&self) -> u32 {
        self.step.as_ref().map(|s| s.next_index.saturating_sub(1)).unwrap_or(0)
    }

    /// Starts the block of the run just opened (argument fragments with no call open none).
    fn open_block(&mut self, out: &mut Vec<OutLine>) {
        let Some(step) = &mut self.step else { return };
        let start = match step.runs.open() {
            Some(Run::Content(ContentPart::Think { .. })) => {
                Block::Thinking { thinking: String::new(), signature: String::new() }
            }
            Some(Run::Content(_)) => Block::Text { text: String::new() },
            Some(Run::Call(call)) => {
                step.has_tool_calls = true;
                Block::ToolUse {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                    input: Value::Object(Default::default()),
                }
            }
            Some(Run::Arguments(_)) | None => return,
        };
        let index = step.next_index;
        step.next_index += 1;
        self.partial_line(out, StreamEvent::ContentBlockStart { index, content_block: start });
    }

    /// Closes the open block: its stop event now, its assistant line once the usage is known.
    fn close_block(&mut self, out: &mut Vec<OutLine>) {
        let closed = self.step.as_mut().and_then(|s| s.runs.close());
        self.close_run(closed, out);
    }

    fn close_run(&mut self, run: Option<Run>, out: &mut Vec<OutLine>) {
        let Some(step) = &mut self.step else { return };
        let block = match run {
            Some(Run::Content(ContentPart::Text { text })) => {
                step.text.push_str(&text);
                Block::Text { text }
            }
            Some(Run::Content(ContentPart::Think { think, encrypted })) => {
                Block::Thinking { thinking: think, signature: encrypted.unwrap_or_default() }
            }
            // No Anthropic block for media the model outputs: a text block names it.
            Some(Run::Content(media)) => Block::Text { text: media_name(&media).into() },
            Some(Run::Call(call)) => {
                let arguments = call.function.arguments.as_deref().unwrap_or_default();
                let input = parse_input(arguments);
                self.inputs.insert(call.id.clone(), (call.function.name.clone(), input.clone()));
                Block::ToolUse { id: call.id, name: call.function.name, input }
            }
            Some(Run::Arguments(_)) | None => return,
        };
        step.closed.push(block);
        let index = self.open_index();
        self.partial_line(out, StreamEvent::ContentBlockStop { index });
        if self.step.as_ref().is_some_and(|s| s.usage.is_some()) {
            self.flush_blocks(out);
        }
    }

    /// Writes the closed blocks as assistant lines (with the step's usage, or zeros if the
    /// stream never reported one).
    fn flush_blocks(&mut self, out: &mut Vec<OutLine>) {
        let Some(step) = &mut self.step else { return };
        let blocks = std::mem::take(&mut step.closed);
        let usage = step.usage.unwrap_or_default();
        let id = step.message_id.clone();
        for block in blocks {
            out.push(OutLine::Assistant(AssistantLine {
                message: self.assistant_message(&id, vec![block], usage),
                parent_tool_use_id: None,
                session_id: self.id.session_id.clone(),
                uuid: fresh_uuid(),
                error: None,
                api_error_status: None,
                agent_id: None,
                subagent_type: None,
            }));
        }
    }

    /// Closes and writes everything of the step so far (before a tool result or an approval).
    pub fn flush(&mut self, out: &mut Vec<OutLine>) {
        self.close_block(out);
        if let Some(step) = &mut self.step
            && step.streamed.is_none()
        {
            step.streamed = Some(Instant::now());
        }
        self.flush_blocks(out);
    }

    fn end_step(&mut self, out: &mut Vec<OutLine>) {
        self.flush(out);
        let Some(step) = self.step.take() else { return };
        self.api_time += step.streamed.unwrap_or_else(Instant::now).saturating_duration_since(step.started);
        self.last_text = step.text;
        if self.partial {
            let stop = if step.has_tool_calls { "tool_use" } else { "end_turn" };
            let output_tokens = step.usage.map(|u| u.output_tokens).unwrap_or(0);
            out.push(self.stream_line(StreamEvent::MessageDelta {
                delta: MessageDeltaBody { stop_reason: Some(stop.into()), stop_sequence: None },
                usage: OutputUsage { output_tokens },
            }));
            out.push(self.stream_line(StreamEvent::MessageStop {}));
        }
    }

    /// The background tasks announced since the last call: (call id, task id).
    pub fn take_started_background(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.started_background)
    }

    /// The ids of the background tasks announced and not ended; `agents_only`: subagents only.
    pub fn open_background(&self, agents_only: bool) -> Vec<String> {
        let open = self.tasks.values().filter(|t| t.background && !t.ended);
        open.filter(|t| !agents_only || t.task_type == LOCAL_AGENT).map(|t| t.task_id.clone()).collect()
    }

    /// A line from inside a background subagent run (the task `task`).
    pub fn background_subagent(&mut self, inner: &SubagentEvent, task: BackgroundRef, out: &mut Vec<OutLine>) {
        self.subagent(inner, Some(task), out);
    }

    /// A task the call of `result` started in the background, announced: a subagent (the
    /// `Agent` result names its task, `docs/protocol-1.10.md` §8.4) as `local_agent` unless its
    /// first line came first, a shell command (its result shows the task's block) as
    /// `local_bash`.
    fn background_start(&mut self, result: &ToolResult) {
        let name = self.inputs.get(&result.tool_call_id).map(|(name, _)| name.as_str()).unwrap_or_default();
        if result.return_value.is_error || self.tasks.contains_key(&result.tool_call_id) {
            return;
        }
        if name == "Agent" {
            return self.background_agent(result);
        }
        if name != "Shell" && name != "Bash" {
            return;
        }
        let started = result.return_value.display.iter().find_map(|block| match block {
            crate::protocol::DisplayBlock::BackgroundTask { task_id, kind, status, description }
                if *kind == crate::protocol::display::TaskKind::Bash
                    && (status == "starting" || status == "running") =>
            {
                Some((task_id.clone(), description.clone()))
            }
            _ => None,
        });
        let Some((task_id, description)) = started else { return };
        self.tasks.insert(result.tool_call_id.clone(), Task::new(task_id, LOCAL_BASH, description, true));
    }

    /// A background subagent's task, from its `Agent` call's result; announced by
    /// [`Self::task_lines`].
    fn background_agent(&mut self, result: &ToolResult) {
        let ToolOutput::Text(text) = &result.return_value.output else { return };
        let field = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(": "))).map(str::to_string)
        };
        let (Some(task_id), Some(agent_id)) = (field("task_id"), field("agent_id")) else { return };
        let input = self.inputs.get(&result.tool_call_id).map(|(_, v)| v.clone()).unwrap_or(Value::Null);
        let description = input.get("description").and_then(Value::as_str).unwrap_or_default().to_string();
        let task = Task {
            agent_id,
            subagent_type: field("actual_subagent_type").unwrap_or_default(),
            message_id: fresh_message_id(),
            ..Task::new(task_id, LOCAL_AGENT, description, true)
        };
        self.tasks.insert(result.tool_call_id.clone(), task);
    }

    /// `system/task_started` for the task of the call `parent`, once.
    fn task_lines(&mut self, parent: &str, out: &mut Vec<OutLine>) {
        let input = self.inputs.get(parent).map(|(_, v)| v.clone()).unwrap_or(Value::Null);
        let Some(task) = self.tasks.get_mut(parent).filter(|t| !t.announced) else { return };
        task.announced = true;
        let agent = task.task_type == LOCAL_AGENT;
        let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or_default().to_string();
        out.push(OutLine::System(SystemLine::TaskStarted(TaskStartedLine {
            task_id: task.task_id.clone(),
            tool_use_id: parent.to_string(),
            description: task.description.clone(),
            subagent_type: agent.then(|| task.subagent_type.clone()),
            task_type: task.task_type.into(),
            is_backgrounded: task.background,
            prompt: agent.then_some(prompt),
            session_id: self.id.session_id.clone(),
            uuid: fresh_uuid(),
        })));
        if task.background {
            self.started_background.push((parent.to_string(), task.task_id.clone()));
        }
    }

    /// The terminal frames of the background task `task_id`, if it was announced and is open.
    pub fn end_background(&mut self, task_id: &str, ending: &TaskEnding, out: &mut Vec<OutLine>) {
        let call = self.tasks.iter().find(|(_, t)| t.task_id == task_id && t.background).map(|(call, _)| call.clone());
        if let Some(call) = call {
            self.close_task(&call, ending.updated, ending.notified, &ending.output_file, out);
        }
    }

    /// A line from inside a subagent: with the `Agent` call's id (and the subagent's), its
    /// start announced by `system/task_started` the first time. `background`: the run is a
    /// background task (else it runs inside its call).
    fn subagent(&mut self, inner: &SubagentEvent, background: Option<BackgroundRef>, out: &mut Vec<OutLine>) {
        let Some(parent) = inner.parent_tool_call_id.clone() else { return };
        // The main agent's blocks so far come first (the Agent call among them, when it is of
        // this turn: a background run may speak while a later turn streams).
        if background.is_none() || self.inputs.contains_key(&parent) {
            self.flush(out);
        }
        if self.tasks.get(&parent).is_none_or(|t| t.ended) {
            let input = self.inputs.get(&parent).map(|(_, v)| v.clone()).unwrap_or(Value::Null);
            let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
            let agent_id = inner.agent_id.clone().unwrap_or_default();
            let (task_id, description) = match &background {
                Some(task) => (task.task_id.clone(), task.description.clone()),
                None => (agent_id.clone(), text("description")),
            };
            let task = Task {
                agent_id,
                subagent_type: inner.subagent_type.clone().unwrap_or_default(),
                message_id: fresh_message_id(),
                ..Task::new(task_id, LOCAL_AGENT, description, background.is_some())
            };
            self.tasks.insert(parent.clone(), task);
        }
        self.task_lines(&parent, out);
        let Some(task) = self.tasks.get_mut(&parent) else { return };
        let block = match &*inner.event {
            Event::TurnBegin { user_input } => {
                let content = UserContent::Text(user_input.text_input());
                let line = self.sub_user_line(&parent, content, None);
                out.push(line);
                return;
            }
            Event::StepBegin { .. } => {
                task.message_id = fresh_message_id();
                return;
            }
            Event::StatusUpdate(status) => {
                if let Some(u) = status.token_usage {
                    task.tokens += u.input_other + u.input_cache_read + u.input_cache_creation + u.output;
                }
                return;
            }
            Event::ContentPart(ContentPart::Text { text }) if !text.is_empty() => Block::Text { text: text.clone() },
            Event::ContentPart(ContentPart::Think { think, encrypted }) => {
                Block::Thinking { thinking: think.clone(), signature: encrypted.clone().unwrap_or_default() }
            }
            Event::ToolCall(call) => {
                task.tool_uses += 1;
                let input = parse_input(call.function.arguments.as_deref().unwrap_or_default());
                let line = self.sub_assistant_line(
                    &parent,
                    Block::ToolUse { id: call.id.clone(), name: call.function.name.clone(), input },
                );
                out.extend(line);
                if let Some(task) = self.tasks.get(&parent) {
                    out.push(OutLine::System(SystemLine::TaskProgress(TaskProgressLine {
                        task_id: task.task_id.clone(),
                        tool_use_id: parent.clone(),
                        description: task.description.clone(),
                        usage: TaskUsage {
                            total_tokens: task.tokens,
                            tool_uses: task.tool_uses,
                            duration_ms: millis(task.started.elapsed()),
                        },
                        last_tool_name: call.function.name.clone(),
                        session_id: self.id.session_id.clone(),
                        uuid: fresh_uuid(),
                    })));
                }
                return;
            }
            Event::ToolResult(result) => {
                let line = self.tool_result_line(result, Some(&parent));
                out.push(line);
                return;
            }
            _ => return,
        };
        out.extend(self.sub_assistant_line(&parent, block));
    }

    /// An assistant line of the subagent run for the call `parent`.
    fn sub_assistant_line(&self, parent: &str, block: Block) -> Option<OutLine> {
        let task = self.tasks.get(parent)?;
        Some(OutLine::Assistant(AssistantLine {
            message: self.assistant_message(&task.message_id, vec![block], Usage::default()),
            parent_tool_use_id: Some(parent.to_string()),
            session_id: self.id.session_id.clone(),
            uuid: fresh_uuid(),
            error: None,
            api_error_status: None,
            agent_id: Some(task.agent_id.clone()),
            subagent_type: Some(task.subagent_type.clone()),
        }))
    }

    /// The terminal frames of the foreground task run for `tool_call_id`, if one was started
    /// and is open (a background one ends on its own).
    fn end_task(&mut self, tool_call_id: &str, status: &'static str, out: &mut Vec<OutLine>) {
        if self.tasks.get(tool_call_id).is_some_and(|t| !t.background) {
            // `task_updated` says `killed` where the notification says `stopped`.
            let updated = if status == "stopped" { "killed" } else { status };
            self.close_task(tool_call_id, updated, status, "", out);
        }
    }

    fn close_task(
        &mut self,
        tool_call_id: &str,
        updated: &str,
        notified: &str,
        output_file: &str,
        out: &mut Vec<OutLine>,
    ) {
        let Some(task) = self.tasks.get_mut(tool_call_id).filter(|t| !t.ended) else { return };
        task.ended = true;
        let session_id = self.id.session_id.clone();
        out.push(OutLine::System(SystemLine::TaskUpdated(TaskUpdatedLine {
            task_id: task.task_id.clone(),
            patch: serde_json::json!({"status": updated}),
            session_id: session_id.clone(),
            uuid: fresh_uuid(),
        })));
        out.push(OutLine::System(SystemLine::TaskNotification(TaskNotificationLine {
            task_id: task.task_id.clone(),
            tool_use_id: tool_call_id.to_string(),
            status: notified.to_string(),
            output_file: output_file.to_string(),
            summary: task.description.clone(),
            usage: TaskUsage {
                total_tokens: task.tokens,
                tool_uses: task.tool_uses,
                duration_ms: millis(task.started.elapsed()),
            },
            session_id,
            uuid: fresh_uuid(),
        })));
    }

    fn sub_user_line(&self, parent: &str, content: UserContent, result: Option<ToolUseResult>) -> OutLine {
        let task = self.tasks.get(parent);
        OutLine::User(UserLine {
            message: UserMessage { role: "user".into(), content },
            parent_tool_use_id: Some(parent.to_string()),
            session_id: self.id.session_id.clone(),
            uuid: fresh_uuid(),
            tool_use_result: result,
            is_replay: None,
            agent_id: task.map(|t| t.agent_id.clone()),
            subagent_type: task.map(|t| t.subagent_type.clone()),
        })
    }

    /// A tool result as a `user` line; `parent`: the `Agent` call of the subagent it is from.
    fn tool_result_line(&self, result: &ToolResult, parent: Option<&str>) -> OutLine {
        let rv = &result.return_value;
        let denied = parent.is_none().then(|| self.denied.get(&result.tool_call_id)).flatten();
        let (content, is_error) = match denied {
            Some(message) => (ToolResultContent::Text(message.clone()), true),
            None if self.is_foreground_agent_result(result) => (agent_result_content(&rv.output), false),
            None => (tool_result_content(&rv.output, &rv.message, rv.is_error), rv.is_error),
        };
        let content = UserContent::Blocks(vec![block_value(Block::ToolResult {
            tool_use_id: result.tool_call_id.clone(),
            content,
            is_error,
        })]);
        let structured =
            ToolUseResult { output: rv.output.clone(), message: rv.message.clone(), display: rv.display.clone() };
        if let Some(parent) = parent {
            return self.sub_user_line(parent, content, Some(structured));
        }
        OutLine::User(UserLine {
            message: UserMessage { role: "user".into(), content },
            parent_tool_use_id: None,
            session_id: self.id.session_id.clone(),
            uuid: fresh_uuid(),
            tool_use_result: Some(structured),
            is_replay: None,
            agent_id: None,
            subagent_type: None,
        })
    }

    /// A finished foreground `Agent` call (not one that started a background task).
    fn is_foreground_agent_result(&self, result: &ToolResult) -> bool {
        let name = self.inputs.get(&result.tool_call_id).map(|(name, _)| name.as_str());
        name == Some("Agent")
            && !result.return_value.is_error
            && !self.tasks.get(&result.tool_call_id).is_some_and(|t| t.background)
    }

    /// Ends the turn: closes the last step and returns its `result` line, preceded by the
    /// synthetic assistant line of an API error.
    pub fn finish(&mut self, result: &TurnResult, interrupted_by: &str, out: &mut Vec<OutLine>) -> ResultLine {
        self.end_step(out);
        // Every task the host saw start gets its terminal frame.
        let open: Vec<String> = self.tasks.iter().filter(|(_, t)| !t.ended).map(|(id, _)| id.clone()).collect();
        for id in open {
            self.end_task(&id, "stopped", out);
        }
        let mut line = ResultLine {
            subtype: ResultSubtype::Success,
            is_error: false,
            duration_ms: millis(self.started.elapsed()),
            duration_api_ms: millis(self.api_time),
            num_turns: self.num_turns,
            result: None,
            stop_reason: None,
            session_id: self.id.session_id.clone(),
            total_cost_usd: 0.0,
            usage: self.usage,
            model_usage: self.model_usage.clone(),
            permission_denials: std::mem::take(&mut self.denials),
            uuid: fresh_uuid(),
            errors: None,
            api_error_status: None,
            structured_output: None,
        };
        let fail = |line: &mut ResultLine, subtype: ResultSubtype, error: String| {
            line.subtype = subtype;
            line.is_error = true;
            line.errors = Some(vec![error]);
        };
        match result {
            Ok(TurnOutcome::Finished(stop)) => {
                line.result = Some(self.last_text.clone());
                let reason = match stop {
                    None => "end_turn",
                    Some(ModelStop::MaxTokens) => "max_tokens",
                    Some(ModelStop::Refusal) => "refusal",
                };
                line.stop_reason = Some(reason.into());
            }
            Ok(TurnOutcome::MaxStepsReached(n)) => {
                fail(&mut line, ResultSubtype::ErrorMaxTurns, format!("Reached the maximum number of turns ({n})"))
            }
            Ok(TurnOutcome::Cancelled) => {
                fail(&mut line, ResultSubtype::ErrorDuringExecution, interrupted_by.to_string())
            }
            Ok(TurnOutcome::TokenBudgetReached { used, limit }) => fail(
                &mut line,
                ResultSubtype::ErrorMaxBudgetUsd,
                format!("Reached the session's token budget ({used} of {limit} tokens)"),
            ),
            Ok(TurnOutcome::CostBudgetReached { limit, .. }) => {
                fail(&mut line, ResultSubtype::ErrorMaxBudgetUsd, format!("Reached maximum budget (${limit})"))
            }
            Err(TurnError::Provider(error)) => {
                let (text, status) = api_error_text(error);
                out.push(OutLine::Assistant(AssistantLine {
                    message: AssistantMessage {
                        model: "<synthetic>".into(),
                        ..self.assistant_message(
                            &fresh_message_id(),
                            vec![Block::Text { text: text.clone() }],
                            Usage::default(),
                        )
                    },
                    parent_tool_use_id: None,
                    session_id: self.id.session_id.clone(),
                    uuid: fresh_uuid(),
                    error: Some(error_class(status).into()),
                    api_error_status: status,
                    agent_id: None,
                    subagent_type: None,
                }));
                line.is_error = true;
                line.result = Some(text);
                line.api_error_status = status;
            }
            Err(other) => fail(&mut line, ResultSubtype::ErrorDuringExecution, other.to_string()),
        }
        line
    }
}

/// The text that stands for a media part the model output.
fn media_name(part: &ContentPart) -> &'static str {
    match part {
        ContentPart::ImageUrl { .. } => "[image]",
        ContentPart::AudioUrl { .. } => "[audio]",
        _ => "[video]",
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn event_name(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "an event".into())
}

fn anthropic_usage(u: TokenUsage) -> Usage {
    Usage {
        input_tokens: u.input_other,
        cache_creation_input_tokens: u.input_cache_creation,
        cache_read_input_tokens: u.input_cache_read,
        output_tokens: u.output,
    }
}

/// Tool-call arguments as a JSON value; `{}` when empty, the raw text as a string when broken.
pub fn parse_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Null) => Value::Object(Default::default()),
        Ok(v) => v,
        Err(_) => Value::String(arguments.to_string()),
    }
}

fn block_value(block: Block) -> Value {
    serde_json::to_value(block).unwrap_or(Value::Null)
}

/// A foreground subagent's result as Claude Code gives it: its final text as a list of text
/// blocks (not a plain string, and with nothing added).
pub fn agent_result_content(output: &ToolOutput) -> ToolResultContent {
    let text = match output {
        ToolOutput::Text(t) => t.clone(),
        ToolOutput::Parts(parts) => parts.iter().filter_map(ContentPart::as_text).collect::<Vec<_>>().join("\n"),
    };
    ToolResultContent::Blocks(vec![Block::Text { text }])
}

/// What the model was told, for a `tool_result` block: the message and the output text joined
/// by a newline (errors wrapped in `<tool_use_error>`), output images as image blocks.
pub fn tool_result_content(output: &ToolOutput, message: &str, is_error: bool) -> ToolResultContent {
    let mut texts: Vec<String> = Vec::new();
    let mut images: Vec<Block> = Vec::new();
    if !message.is_empty() {
        texts.push(message.to_string());
    }
    match output {
        // A tool whose output repeats its message says it once.
        ToolOutput::Text(t) if !t.is_empty() && t.trim() != message.trim() => texts.push(t.clone()),
        ToolOutput::Text(_) => {}
        ToolOutput::Parts(parts) => {
            for part in parts {
                match part {
                    ContentPart::Text { text } => texts.push(text.clone()),
                    ContentPart::ImageUrl { image_url } => images.push(image_block(&image_url.url)),
                    ContentPart::AudioUrl { .. } => texts.push("[audio]".into()),
                    ContentPart::VideoUrl { .. } => texts.push("[video]".into()),
                    ContentPart::Think { .. } => {}
                }
            }
        }
    }
    let mut text = texts.join("\n");
    if is_error {
        text = format!("<tool_use_error>{text}</tool_use_error>");
    } else if text.is_empty() && images.is_empty() {
        text = "Tool output is empty.".into();
    }
    if images.is_empty() {
        return ToolResultContent::Text(text);
    }
    let mut blocks = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        blocks.push(Block::Text { text });
    }
    blocks.extend(images);
    ToolResultContent::Blocks(blocks)
}

/// A `data:` URL becomes a base64 source, anything else a URL source.
pub fn image_block(url: &str) -> Block {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
    {
        return Block::Image { source: ImageSource::Base64 { media_type: media_type.into(), data: data.into() } };
    }
    Block::Image { source: ImageSource::Url { url: url.into() } }
}

/// The `result` text of an API error and its HTTP status, if it had one.
pub fn api_error_text(error: &ChatError) -> (String, Option<u16>) {
    match error {
        ChatError::Status { status, message, .. } => (format!("API Error: {status} {message}"), Some(*status)),
        other => (format!("API Error: {other}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{StatusUpdate, ToolCall, ToolCallPart, ToolReturnValue};

    fn lines(partial: bool, events: &[Event], result: TurnResult) -> Vec<Value> {
        let mut t =
            TurnLines::new(Identity { session_id: "S".into(), model: "m".into(), context_window: 100 }, partial);
        t.begin("go");
        let mut out = Vec::new();
        for e in events {
            t.event(e, &mut out);
        }
        let r = t.finish(&result, "Interrupted by user", &mut out);
        out.push(OutLine::Result(r));
        out.iter().map(|l| serde_json::to_value(l).unwrap()).collect()
    }

    fn kinds(lines: &[Value]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match l["type"].as_str().unwrap() {
                "stream_event" => format!("se:{}", l["event"]["type"].as_str().unwrap()),
                "assistant" => format!("a:{}", l["message"]["content"][0]["type"].as_str().unwrap()),
                other => other.to_string(),
            })
            .collect()
    }

    fn shell_turn() -> Vec<Event> {
        vec![
            Event::StepBegin { n: 1 },
            Event::ContentPart(ContentPart::text("Let me ")),
            Event::ContentPart(ContentPart::text("check.")),
            Event::ToolCall(ToolCall::new("tool_1", "Shell", Some("{\"command\":".into()))),
            Event::ToolCallPart(ToolCallPart { arguments_part: Some("\"ls\"}".into()) }),
            Event::StatusUpdate(StatusUpdate {
                context_usage: None,
                token_usage: Some(TokenUsage {
                    input_other: 900,
                    output: 20,
                    input_cache_read: 0,
                    input_cache_creation: 0,
                }),
                message_id: None,
                ..StatusUpdate::default()
            }),
            Event::ToolResult(ToolResult {
                tool_call_id: "tool_1".into(),
                return_value: ToolReturnValue::ok("a.py\nb.py\n", "Command executed successfully."),
            }),
            Event::StepBegin { n: 2 },
            Event::ContentPart(ContentPart::text("There are two files.")),
            Event::StatusUpdate(StatusUpdate {
                context_usage: None,
                token_usage: Some(TokenUsage {
                    input_other: 950,
                    output: 8,
                    input_cache_read: 0,
                    input_cache_creation: 0,
                }),
                message_id: None,
                ..StatusUpdate::default()
            }),
            Event::TurnEnd {},
        ]
    }

    #[test]
    fn the_worked_example() {
        let out = lines(false, &shell_turn(), Ok(TurnOutcome::Finished(None)));
        assert_eq!(kinds(&out), ["a:text", "a:tool_use", "user", "a:text", "result"]);
        assert_eq!(out[0]["message"]["content"][0]["text"], "Let me check.");
        assert_eq!(out[0]["message"]["usage"]["input_tokens"], 900);
        assert_eq!(out[0]["message"]["id"], out[1]["message"]["id"]);
        assert_ne!(out[0]["message"]["id"], out[3]["message"]["id"]);
        assert_eq!(out[1]["message"]["content"][0]["input"], serde_json::json!({"command":"ls"}));
        assert_eq!(
            out[2]["message"]["content"][0],
            serde_json::json!({"type":"tool_result","tool_use_id":"tool_1","content":"Command executed successfully.\na.py\nb.py\n","is_error":false})
        );
        let r = &out[4];
        assert_eq!(r["subtype"], "success");
        assert_eq!(r["result"], "There are two files.");
        assert_eq!(r["num_turns"], 2);
        assert_eq!(r["usage"]["input_tokens"], 1850);
        assert_eq!(r["usage"]["output_tokens"], 28);
        assert_eq!(r["modelUsage"]["m"]["inputTokens"], 1850);
        assert!(r.get("errors").is_none());
    }

    #[test]
    fn partial_messages_precede_their_blocks() {
        let out = lines(true, &shell_turn(), Ok(TurnOutcome::Finished(None)));
        assert_eq!(
            kinds(&out),
            [
                "se:message_start",
                "se:content_block_start",
                "se:content_block_delta",
                "se:content_block_delta",
                "se:content_block_stop",
                "se:content_block_start",
                "se:content_block_delta",
                "se:content_block_delta",
                "se:content_block_stop",
                "a:text",
                "a:tool_use",
                "user",
                "se:message_delta",
                "se:message_stop",
                "se:message_start",
                "se:content_block_start",
                "se:content_block_delta",
                "se:content_block_stop",
                "a:text",
                "se:message_delta",
                "se:message_stop",
                "result",
            ]
        );
        assert_eq!(out[5]["event"]["index"], 1);
        assert_eq!(out[12]["event"]["delta"]["stop_reason"], "tool_use");
        assert_eq!(out[19]["event"]["delta"]["stop_reason"], "end_turn");
    }

    #[test]
    fn thinking_blocks_carry_their_signature() {
        let events = vec![
            Event::StepBegin { n: 1 },
            Event::ContentPart(ContentPart::think("a")),
            Event::ContentPart(ContentPart::Think { think: "b".into(), encrypted: Some("sig".into()) }),
            Event::ContentPart(ContentPart::think("c")),
            Event::StatusUpdate(StatusUpdate::default()),
            Event::TurnEnd {},
        ];
        let out = lines(false, &events, Ok(TurnOutcome::Finished(None)));
        assert_eq!(
            out[0]["message"]["content"][0],
            serde_json::json!({"type":"thinking","thinking":"ab","signature":"sig"})
        );
        assert_eq!(
            out[1]["message"]["content"][0],
            serde_json::json!({"type":"thinking","thinking":"c","signature":""})
        );
    }

    #[test]
    fn media_stands_alone_and_text_runs_merge_into_one_block() {
        let image = ContentPart::ImageUrl { image_url: crate::protocol::MediaUrl::new("u") };
        let events = vec![
            Event::StepBegin { n: 1 },
            Event::ContentPart(image),
            Event::ContentPart(ContentPart::text("a")),
            Event::ContentPart(ContentPart::text("b")),
            Event::StatusUpdate(StatusUpdate::default()),
            Event::TurnEnd {},
        ];
        let out = lines(true, &events, Ok(TurnOutcome::Finished(None)));
        assert_eq!(
            kinds(&out),
            [
                "se:message_start",
                "se:content_block_start",
                "se:content_block_delta",
                "se:content_block_stop",
                "se:content_block_start",
                "se:content_block_delta",
                "se:content_block_delta",
                "se:content_block_stop",
                "a:text",
                "a:text",
                "se:message_delta",
                "se:message_stop",
                "result",
            ]
        );
        assert_eq!((out[3]["event"]["index"].as_u64(), out[7]["event"]["index"].as_u64()), (Some(0), Some(1)));
        assert_eq!(out[2]["event"]["delta"]["text"], "[image]");
        assert_eq!(out[8]["message"]["content"][0]["text"], "[image]");
        assert_eq!(out[9]["message"]["content"][0]["text"], "ab");
        assert_eq!(out[12]["result"], "ab");
    }

    #[test]
    fn outcomes_make_their_results() {
        for (stop, reason) in
            [(None, "end_turn"), (Some(ModelStop::MaxTokens), "max_tokens"), (Some(ModelStop::Refusal), "refusal")]
        {
            let r = lines(false, &[], Ok(TurnOutcome::Finished(stop))).pop().unwrap();
            assert_eq!((r["subtype"].as_str(), r["stop_reason"].as_str()), (Some("success"), Some(reason)));
        }
        let r = lines(false, &[], Ok(TurnOutcome::MaxStepsReached(3))).pop().unwrap();
        assert_eq!((r["subtype"].as_str(), r["is_error"].as_bool()), (Some("error_max_turns"), Some(true)));
        assert!(r.get("result").is_none());
        let r = lines(false, &[], Ok(TurnOutcome::Cancelled)).pop().unwrap();
        assert_eq!(r["errors"], serde_json::json!(["Interrupted by user"]));
        let r = lines(false, &[], Err(TurnError::LlmNotSet { reason: None })).pop().unwrap();
        assert_eq!(r["errors"], serde_json::json!(["LLM is not set"]));
        let out = lines(
            false,
            &[],
            Err(TurnError::Provider(ChatError::Status {
                status: 401,
                message: "Token expired".into(),
                retry_after: None,
            })),
        );
        assert_eq!(out[0]["error"], "authentication_failed");
        assert_eq!(out[0]["message"]["model"], "<synthetic>");
        assert_eq!(out[0]["message"]["content"][0]["text"], "API Error: 401 Token expired");
        assert_eq!(out[1]["subtype"], "success");
        assert_eq!(out[1]["is_error"], true);
        assert_eq!(out[1]["result"], "API Error: 401 Token expired");
        assert!(out[1].get("errors").is_none());
        let (text, status) = api_error_text(&ChatError::Connection("refused".into()));
        assert_eq!((text.as_str(), status), ("API Error: refused", None));
    }

    #[test]
    fn denied_calls_show_the_message() {
        let mut t = TurnLines::new(Identity { session_id: "S".into(), model: "m".into(), context_window: 1 }, false);
        t.begin("x");
        let mut out = Vec::new();
        t.event(&Event::StepBegin { n: 1 }, &mut out);
        t.event(&Event::ToolCall(ToolCall::new("c", "Shell", Some("{\"command\":\"rm\"}".into()))), &mut out);
        t.flush(&mut out);
        t.deny("Shell", "c", "no way");
        t.event(
            &Event::ToolResult(ToolResult {
                tool_call_id: "c".into(),
                return_value: ToolReturnValue::error("no way", "Denied"),
            }),
            &mut out,
        );
        let user = serde_json::to_value(out.last().unwrap()).unwrap();
        assert_eq!(user["message"]["content"][0]["content"], "no way");
        assert_eq!(user["message"]["content"][0]["is_error"], true);
        let r = t.finish(&Ok(TurnOutcome::Finished(None)), "", &mut out);
        assert_eq!(r.permission_denials[0].tool_input, serde_json::json!({"command":"rm"}));
    }

    #[test]
    fn tool_result_contents() {
        assert_eq!(
            tool_result_content(&ToolOutput::Text(String::new()), "bad path", true),
            ToolResultContent::Text("<tool_use_error>bad path</tool_use_error>".into())
        );
        assert_eq!(
            tool_result_content(&ToolOutput::Text(String::new()), "", false),
            ToolResultContent::Text("Tool output is empty.".into())
        );
        let parts = ToolOutput::Parts(vec![ContentPart::ImageUrl {
            image_url: crate::protocol::MediaUrl::new("data:image/png;base64,AAAA"),
        }]);
        let ToolResultContent::Blocks(blocks) = tool_result_content(&parts, "Loaded", false) else { panic!() };
        assert_eq!(
            serde_json::to_value(&blocks).unwrap(),
            serde_json::json!([{"type":"text","text":"Loaded"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}])
        );
        assert_eq!(parse_input("{bad"), Value::String("{bad".into()));
    }

    fn sub(parent: &str, event: Event) -> Event {
        Event::SubagentEvent(SubagentEvent {
            parent_tool_call_id: Some(parent.into()),
            agent_id: Some("a00000001".into()),
            subagent_type: Some("coder".into()),
            event: Box::new(event),
        })
    }

    fn agent_call(id: &str, background: bool) -> Vec<Event> {
        let arguments =
            format!(r#"{{"description":"d","prompt":"p","subagent_type":"coder","run_in_background":{background}}}"#);
        vec![Event::StepBegin { n: 1 }, Event::ToolCall(ToolCall::new(id, "Agent", Some(arguments)))]
    }

    #[test]
    fn a_cancelled_foreground_subagent_is_reported_stopped() {
        let mut events = agent_call("ag1", false);
        events.push(sub("ag1", Event::TurnBegin { user_input: crate::protocol::UserInput::Text("p".into()) }));
        let out = lines(false, &events, Ok(TurnOutcome::Cancelled));
        let started = out.iter().find(|l| l["subtype"] == "task_started").unwrap();
        assert_eq!(
            (started["task_id"].as_str(), started["is_backgrounded"].as_bool()),
            (Some("a00000001"), Some(false))
        );
        let updated = out.iter().find(|l| l["subtype"] == "task_updated").unwrap();
        assert_eq!(updated["patch"], serde_json::json!({"status": "killed"}));
        let notified = out.iter().find(|l| l["subtype"] == "task_notification").unwrap();
        assert_eq!(notified["status"], "stopped");
    }

    #[test]
    fn a_background_subagent_outlives_its_turn_until_it_ends() {
        let mut t = TurnLines::new(Identity { session_id: "S".into(), model: "m".into(), context_window: 100 }, false);
        t.begin("go");
        let mut out = Vec::new();
        for e in agent_call("bg1", true) {
            t.event(&e, &mut out);
        }
        let output = "task_id: agent-12345678\nkind: agent\nstatus: starting\ndescription: d\nagent_id: a00000001\nactual_subagent_type: coder";
        let result = ToolResult {
            tool_call_id: "bg1".into(),
            return_value: ToolReturnValue::ok(output, "Background task started."),
        };
        t.event(&Event::ToolResult(result), &mut out);
        assert_eq!(t.take_started_background(), [("bg1".to_string(), "agent-12345678".to_string())]);
        assert!(t.take_started_background().is_empty());
        t.finish(&Ok(TurnOutcome::Finished(None)), "", &mut out);
        t.begin("next");
        // A line of the run in a later turn still carries the call's id; the task is announced once.
        let task = BackgroundRef { task_id: "agent-12345678".into(), description: "d".into() };
        let Event::SubagentEvent(inner) = sub("bg1", Event::ContentPart(ContentPart::text("working"))) else {
            unreachable!()
        };
        t.background_subagent(&inner, task, &mut out);
        assert_eq!(t.open_background(true), ["agent-12345678"]);
        let ending = TaskEnding { updated: "completed", notified: "completed", output_file: "/o".into() };
        t.end_background("agent-12345678", &ending, &mut out);
        t.end_background("agent-12345678", &ending, &mut out);
        let out: Vec<Value> = out.iter().map(|l| serde_json::to_value(l).unwrap()).collect();
        let frames: Vec<&str> = out.iter().filter_map(|l| l["subtype"].as_str()).collect();
        assert_eq!(frames, ["task_started", "task_updated", "task_notification"], "{out:?}");
        let started = &out.iter().find(|l| l["subtype"] == "task_started").unwrap();
        assert_eq!(
            (started["task_id"].as_str(), started["is_backgrounded"].as_bool()),
            (Some("agent-12345678"), Some(true))
        );
        assert_eq!((started["subagent_type"].as_str(), started["prompt"].as_str()), (Some("coder"), Some("p")));
        let text = out.iter().find(|l| l["type"] == "assistant" && l["parent_tool_use_id"] == "bg1").unwrap();
        assert_eq!(text["message"]["content"][0]["text"], "working");
        assert!(t.open_background(false).is_empty());
    }
}
