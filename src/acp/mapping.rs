//! The core's events as ACP `session/update`s (`docs/acp.md` §13): one mapping for live turns and for
//! the history replayed by `session/load`, so a loaded session looks like it did live.
//!
//! Invariants: ACP tool call ids are `<turn id>/<model's id>` (model ids can repeat across turns);
//! a `ToolCallPart` belongs to the last `ToolCall`; a result for a call this turn never announced
//! is still shown (as a completed call with its own `tool_call`); every chunk carries the
//! `messageId` of its message: one per user message, one per step for the agent's words and
//! thoughts (one model message), one for a plan shown as the agent's words.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, CurrentModeUpdate, Diff, MessageId, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, ToolCall as AcpToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, UsageUpdate,
};

use super::modes;
use super::tool_view;
use crate::protocol::{
    ContentPart, DisplayBlock, Event, TodoStatus, TokenUsage, ToolOutput, ToolReturnValue, UserInput,
};

struct CallState {
    name: String,
    arguments: String,
    title: String,
}

/// Per-session mapping state.
pub struct EventMapper {
    cwd: PathBuf,
    turn: String,
    calls: HashMap<String, CallState>,
    last_call: Option<String>,
    /// Calls that ran in the client's terminal: their result shows no content (the terminal is
    /// already embedded in the call).
    terminal_calls: HashSet<String>,
    plan_mode: Option<bool>,
    /// The mode outside plan mode (`default`, `acceptEdits` or `yolo`).
    base_mode: &'static str,
    /// The mode the client was last told about.
    announced: Option<&'static str>,
    /// Replaying history: the user's own messages are shown too.
    replay: bool,
    /// The next turn to begin is one this client started (its prompt is not echoed back).
    own_next: bool,
    /// How deep in (nested) turns the stream is: only a top-level turn is someone's prompt.
    depth: u32,
    /// The `messageId` of the agent's chunks in the current step.
    step_message: MessageId,
    /// Tokens the current turn used so far (its steps' and its subagents' model calls); `None`
    /// while no call reported any.
    turn_usage: Option<TokenUsage>,
}

impl EventMapper {
    pub fn new(cwd: PathBuf, replay: bool) -> Self {
        Self {
            cwd,
            turn: new_turn_id(),
            calls: HashMap::new(),
            last_call: None,
            terminal_calls: HashSet::new(),
            plan_mode: None,
            base_mode: modes::DEFAULT_MODE,
            announced: None,
            replay,
            own_next: false,
            depth: 0,
            step_message: new_message_id(),
            turn_usage: None,
        }
    }

    /// The tokens the current turn used so far (every model call of it, its subagents' too);
    /// `None` when no call reported its tokens (unknown is not zero).
    pub fn turn_usage(&self) -> Option<TokenUsage> {
        self.turn_usage
    }

    fn count(&mut self, used: TokenUsage) {
        self.turn_usage.get_or_insert_default().add(used);
    }

    /// The ACP id of the model's tool call `id` in the current turn.
    pub fn acp_call_id(&self, id: &str) -> String {
        format!("{}/{id}", self.turn)
    }

    /// The title a call of `tool` with `arguments` gets (for a permission request, from the
    /// request itself: ids can repeat, and a subagent's calls are never announced).
    pub fn title_of(&self, tool: &str, arguments: &str) -> String {
        tool_view::title(tool, arguments, &self.cwd)
    }

    /// Marks a call of this turn as running in the client's terminal.
    pub fn mark_terminal(&mut self, id: &str) {
        self.terminal_calls.insert(id.to_string());
    }

    /// Remembers the mode the client was told about (so a status update that repeats it is quiet):
    /// plan mode on or off, and the mode outside plan mode.
    pub fn set_mode(&mut self, plan: bool, base: &'static str) {
        self.plan_mode = Some(plan);
        self.base_mode = base;
        self.announced = Some(if plan { modes::PLAN_MODE } else { base });
    }

    /// The mode as last seen: plan mode, or the mode outside it.
    pub fn current_mode(&self) -> &'static str {
        if self.plan_mode == Some(true) { modes::PLAN_MODE } else { self.base_mode }
    }

    /// The mode outside plan mode changed (the client is told by the next announcement).
    pub fn set_base_mode(&mut self, base: &'static str) {
        self.base_mode = base;
    }

    /// `current_mode_update` when `mode` is not what the client was last told.
    pub fn announce_mode(&mut self, plan: bool, base: &'static str) -> Option<SessionUpdate> {
        let mode = if plan { modes::PLAN_MODE } else { base };
        self.plan_mode = Some(plan);
        self.base_mode = base;
        if self.announced == Some(mode) {
            return None;
        }
        self.announced = Some(mode);
        Some(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode)))
    }

    /// The next turn is this client's own prompt (`false`: its start was refused after all).
    /// Another client's turn (a session shared with other clients, `docs/host.md`) shows its
    /// prompt as `user_message_chunk`s, as a loaded history does.
    pub fn own_turn_next(&mut self, own: bool) {
        self.own_next = own;
    }

    pub fn map(&mut self, event: &Event) -> Vec<SessionUpdate> {
        match event {
            Event::TurnEnd {} => {
                self.depth = self.depth.saturating_sub(1);
                Vec::new()
            }
            Event::TurnBegin { user_input } => {
                self.depth += 1;
                let others = self.depth == 1 && !std::mem::take(&mut self.own_next);
                self.turn = new_turn_id();
                self.calls.clear();
                self.terminal_calls.clear();
                self.last_call = None;
                self.step_message = new_message_id();
                self.turn_usage = None;
                if self.replay || others { user_chunks(user_input) } else { Vec::new() }
            }
            Event::StepBegin { .. } => {
                self.step_message = new_message_id();
                Vec::new()
            }
            Event::SteerInput { user_input } => user_chunks(user_input),
            Event::ContentPart(part) => content_part(part, &self.step_message).into_iter().collect(),
            Event::ToolCall(call) => {
                let arguments = call.function.arguments.clone().unwrap_or_default();
                let name = call.function.name.clone();
                let title = tool_view::title(&name, &arguments, &self.cwd);
                let mut update = AcpToolCall::new(self.acp_call_id(&call.id), title.clone())
                    .name(name.clone())
                    .kind(tool_view::kind(&name))
                    .status(ToolCallStatus::Pending);
                if let Some(input) = tool_view::parsed(&arguments) {
                    update = update.locations(tool_view::locations(&name, &input, &self.cwd)).raw_input(input);
                }
                self.calls.insert(call.id.clone(), CallState { name, arguments, title });
                self.last_call = Some(call.id.clone());
                vec![SessionUpdate::ToolCall(update)]
            }
            Event::ToolCallPart(part) => {
                let Some(fragment) = part.arguments_part.as_deref().filter(|f| !f.is_empty()) else {
                    return Vec::new();
                };
                let Some(id) = self.last_call.clone() else { return Vec::new() };
                let acp_id = self.acp_call_id(&id);
                let Some(call) = self.calls.get_mut(&id) else { return Vec::new() };
                call.arguments.push_str(fragment);
                let title = tool_view::title(&call.name, &call.arguments, &self.cwd);
                let input = tool_view::parsed(&call.arguments);
                if title == call.title && input.is_none() {
                    return Vec::new();
                }
                call.title = title.clone();
                let mut fields = ToolCallUpdateFields::new().title(title);
                if let Some(input) = input {
                    fields = fields.locations(tool_view::locations(&call.name, &input, &self.cwd)).raw_input(input);
                }
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(acp_id, fields))]
            }
            Event::ToolResult(result) => {
                let mut updates = Vec::new();
                let acp_id = self.acp_call_id(&result.tool_call_id);
                if !self.calls.contains_key(&result.tool_call_id) {
                    // A call whose announcement we never saw (e.g. a record from another writer):
                    // announce it so the update has something to patch.
                    updates.push(SessionUpdate::ToolCall(AcpToolCall::new(acp_id.clone(), "Tool")));
                }
                let value = &result.return_value;
                let status = if value.is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
                let mut fields = ToolCallUpdateFields::new().status(status);
                let content = result_content(value);
                if !content.is_empty() && !self.terminal_calls.contains(&result.tool_call_id) {
                    fields = fields.content(content);
                }
                updates.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(acp_id, fields)));
                updates.extend(plan_updates(&value.display));
                updates
            }
            Event::StatusUpdate(status) => {
                if let Some(used) = status.token_usage {
                    self.count(used);
                }
                let mut updates = Vec::new();
                if let Some(on) = status.plan_mode
                    && self.plan_mode != Some(on)
                    && let Some(update) = self.announce_mode(on, self.base_mode)
                {
                    updates.push(update);
                }
                if let (Some(used), Some(size)) = (status.context_tokens, status.max_context_tokens)
                    && size > 0
                {
                    // The session's total so far, in dollars, when the model has prices.
                    let cost = status.cost.map(|c| Cost::new(c.session_usd, "USD"));
                    updates.push(SessionUpdate::UsageUpdate(UsageUpdate::new(used, size).cost(cost)));
                }
                updates
            }
            // The plan `ExitPlanMode` presents before asking: shown as the agent's words.
            Event::PlanDisplay { content, .. } => {
                let chunk = ContentChunk::new(ContentBlock::from(content.clone())).message_id(new_message_id());
                vec![SessionUpdate::AgentMessageChunk(chunk)]
            }
            // A subagent works inside its parent's `Agent` tool call: the client sees that call
            // and its final result, not the subagent's own steps (`docs/acp.md` §13.1). Its approvals
            // still reach the client, as permission requests of their own; its tokens count
            // in the turn's usage.
            Event::SubagentEvent(sub) => {
                if let Some(used) = subagent_usage(&sub.event) {
                    self.count(used);
                }
                Vec::new()
            }
            // The rest has no ACP form (`docs/acp.md` §13.1: turn/step markers, compaction, hooks,
            // retries, approvals' echoes).
            _ => Vec::new(),
        }
    }
}

fn new_turn_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The tokens a subagent's event reports (a subagent's own subagents' too).
fn subagent_usage(event: &Event) -> Option<TokenUsage> {
    match event {
        Event::StatusUpdate(status) => status.token_usage,
        Event::SubagentEvent(sub) => subagent_usage(&sub.event),
        _ => None,
    }
}

/// A fresh `messageId` (shared by reference among a message's chunks).
fn new_message_id() -> MessageId {
    MessageId::new(uuid::Uuid::new_v4().to_string())
}

fn user_chunks(input: &UserInput) -> Vec<SessionUpdate> {
    let id = new_message_id();
    input
        .to_parts()
        .iter()
        .filter_map(|part| {
            let block = match part {
                ContentPart::Text { text } => ContentBlock::from(text.clone()),
                other => ContentBlock::from(media_placeholder(other)?),
            };
            Some(SessionUpdate::UserMessageChunk(ContentChunk::new(block).message_id(id.clone())))
        })
        .collect()
}

fn content_part(part: &ContentPart, message: &MessageId) -> Option<SessionUpdate> {
    let chunk = |text: String| ContentChunk::new(ContentBlock::from(text)).message_id(message.clone());
    Some(match part {
        ContentPart::Text { text } => SessionUpdate::AgentMessageChunk(chunk(text.clone())),
        ContentPart::Think { think, .. } => SessionUpdate::AgentThoughtChunk(chunk(think.clone())),
        other => SessionUpdate::AgentMessageChunk(chunk(media_placeholder(other)?)),
    })
}

/// Media parts are shown by kind (`docs/acp.md` §13.1).
fn media_placeholder(part: &ContentPart) -> Option<String> {
    match part {
        ContentPart::ImageUrl { .. } => Some("[ImageURLPart]".into()),
        ContentPart::AudioUrl { .. } => Some("[AudioURLPart]".into()),
        ContentPart::VideoUrl { .. } => Some("[VideoURLPart]".into()),
        _ => None,
    }
}

/// A tool result's `content` (`docs/acp.md` §13.2): diffs first, then the model-facing output, else
/// the message.
pub fn result_content(value: &ToolReturnValue) -> Vec<ToolCallContent> {
    let mut content: Vec<ToolCallContent> = value.display.iter().filter_map(diff_content).collect();
    match &value.output {
        ToolOutput::Text(text) if !text.is_empty() => content.push(text_content(text.clone())),
        ToolOutput::Parts(parts) => {
            for part in parts {
                let text = match part {
                    ContentPart::Text { text } => text.clone(),
                    ContentPart::Think { think, .. } => think.clone(),
                    other => media_placeholder(other).unwrap_or_default(),
                };
                content.push(text_content(text));
            }
        }
        _ => {}
    }
    if content.is_empty() && !value.message.is_empty() {
        content.push(text_content(value.message.clone()));
    }
    content
}

/// A diff display block as ACP diff content; a new file has no old text (`docs/acp.md` §13.4: absent,
/// which the schema reads like null — not `""`, an existing empty file).
pub fn diff_content(block: &DisplayBlock) -> Option<ToolCallContent> {
    let DisplayBlock::Diff(diff) = block else { return None };
    if diff.is_summary {
        return None;
    }
    let new_file = diff.old_text.is_empty() && diff.old_start <= 1 && !diff.new_text.is_empty();
    let mut item = Diff::new(PathBuf::from(&diff.path), diff.new_text.clone());
    if !new_file {
        item = item.old_text(diff.old_text.clone());
    }
    Some(ToolCallContent::Diff(item))
}

pub fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::from(text))
}

/// A `plan` update for each todo block with at least one titled item (`docs/acp.md` §13.3).
fn plan_updates(display: &[DisplayBlock]) -> Vec<SessionUpdate> {
    display
        .iter()
        .filter_map(|block| {
            let DisplayBlock::Todo { items } = block else { return None };
            let entries: Vec<PlanEntry> = items
                .iter()
                .filter(|i| !i.title.is_empty())
                .map(|i| {
                    let status = match i.status {
                        TodoStatus::Pending => PlanEntryStatus::Pending,
                        TodoStatus::InProgress => PlanEntryStatus::InProgress,
                        TodoStatus::Done => PlanEntryStatus::Completed,
                    };
                    PlanEntry::new(i.title.clone(), PlanEntryPriority::Medium, status)
                })
                .collect();
            (!entries.is_empty()).then(|| SessionUpdate::Plan(Plan::new(entries)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn map(mapper: &mut EventMapper, event: Value) -> Vec<Value> {
        let event: Event = serde_json::from_value(event).unwrap();
        mapper.map(&event).iter().map(|u| serde_json::to_value(u).unwrap()).collect()
    }

    #[test]
    fn a_streamed_tool_call_and_its_result_map_to_the_schemas_json() {
        let mut m = EventMapper::new(PathBuf::from("/w"), false);
        m.own_turn_next(true);
        assert!(map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"go"}})).is_empty());
        let turn = m.acp_call_id("tc-1");
        let call = map(
            &mut m,
            json!({"type":"ToolCall","payload":{"type":"function","id":"tc-1","function":{"name":"WriteFile","arguments":"{\"path\":\"a."},"extras":null}}),
        );
        assert_eq!(
            call,
            [
                json!({"sessionUpdate":"tool_call","toolCallId":turn,"title":"WriteFile: a.","kind":"edit","name":"WriteFile"})
            ]
        );
        let part = map(&mut m, json!({"type":"ToolCallPart","payload":{"arguments_part":"txt\",\"content\":\"x\"}"}}));
        assert_eq!(
            part,
            [json!({"sessionUpdate":"tool_call_update","toolCallId":turn,"title":"WriteFile: a.txt",
                    "locations":[{"path":"/w/a.txt"}],"rawInput":{"path":"a.txt","content":"x"}})]
        );
        let result = map(
            &mut m,
            json!({"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"",
                "message":"File successfully overwritten.","display":[
                    {"type":"diff","path":"/w/a.txt","old_text":"","new_text":"x","old_start":1,"new_start":1,"is_summary":false},
                    {"type":"todo","items":[{"title":"a","status":"done"},{"title":"","status":"pending"}]}],"extras":null}}}),
        );
        assert_eq!(
            result,
            [
                json!({"sessionUpdate":"tool_call_update","toolCallId":turn,"status":"completed",
                       "content":[{"type":"diff","path":"/w/a.txt","newText":"x"}]}),
                json!({"sessionUpdate":"plan","entries":[{"content":"a","priority":"medium","status":"completed"}]}),
            ]
        );
    }

    #[test]
    fn another_clients_prompt_is_shown_and_a_nested_turn_is_not() {
        let mut m = EventMapper::new(PathBuf::from("/w"), false);
        let theirs = map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"from the wire"}}));
        assert_eq!(theirs.len(), 1);
        assert_eq!(theirs[0]["sessionUpdate"], "user_message_chunk");
        assert_eq!(theirs[0]["content"]["text"], "from the wire");
        // A flow's or `/init`'s inner turn is part of the running one.
        assert!(map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"inner"}})).is_empty());
        map(&mut m, json!({"type":"TurnEnd","payload":{}}));
        map(&mut m, json!({"type":"TurnEnd","payload":{}}));
        m.own_turn_next(true);
        assert!(map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"mine"}})).is_empty());
        map(&mut m, json!({"type":"TurnEnd","payload":{}}));
        assert_eq!(map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"theirs"}})).len(), 1);
    }

    /// The chunk without its `messageId`, and the id.
    fn split_id(mut chunk: Value) -> (Value, String) {
        let id = chunk.as_object_mut().unwrap().remove("messageId").unwrap();
        (chunk, id.as_str().unwrap().to_string())
    }

    #[test]
    fn chunks_modes_and_usage() {
        let mut m = EventMapper::new(PathBuf::from("/w"), true);
        let user = map(
            &mut m,
            json!({"type":"TurnBegin","payload":{"user_input":[
            {"type":"text","text":"hi"},{"type":"text","text":" there"}]}}),
        );
        let (first, user_id) = split_id(user[0].clone());
        assert_eq!(first, json!({"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}));
        assert_eq!(split_id(user[1].clone()).1, user_id, "one id for the whole user message");
        let (thought, step_id) = split_id(
            map(&mut m, json!({"type":"ContentPart","payload":{"type":"think","think":"hm","encrypted":null}}))[0]
                .clone(),
        );
        assert_eq!(thought, json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}));
        assert_ne!(step_id, user_id);
        let words = map(&mut m, json!({"type":"ContentPart","payload":{"type":"text","text":"ok"}}));
        assert_eq!(split_id(words[0].clone()).1, step_id, "a step's chunks are one message");
        assert!(map(&mut m, json!({"type":"StepBegin","payload":{"n":2}})).is_empty());
        let next = map(&mut m, json!({"type":"ContentPart","payload":{"type":"text","text":"more"}}));
        assert_ne!(split_id(next[0].clone()).1, step_id, "the next step is a new message");
        let status = json!({"type":"StatusUpdate","payload":{"context_usage":0.5,"context_tokens":50,"max_context_tokens":100,
            "token_usage":null,"message_id":null,"plan_mode":true,"mcp_status":null}});
        assert_eq!(
            map(&mut m, status.clone()),
            [
                json!({"sessionUpdate":"current_mode_update","currentModeId":"plan"}),
                json!({"sessionUpdate":"usage_update","used":50,"size":100}),
            ]
        );
        // The same mode again is not news.
        assert_eq!(map(&mut m, status), [json!({"sessionUpdate":"usage_update","used":50,"size":100})]);
    }

    #[test]
    fn a_turns_usage_sums_its_steps_and_subagents() {
        let mut m = EventMapper::new(PathBuf::from("/w"), false);
        map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"go"}}));
        assert_eq!(m.turn_usage(), None, "no call reported tokens");
        let status = |input: u64, output: u64| {
            json!({"type":"StatusUpdate","payload":{"token_usage":
            {"input_other":input,"output":output,"input_cache_read":1,"input_cache_creation":0}}})
        };
        map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"go"}}));
        map(&mut m, status(10, 2));
        map(
            &mut m,
            json!({"type":"SubagentEvent","payload":{"parent_tool_call_id":"t","agent_id":"a1",
            "subagent_type":"explore","event":status(5, 1)}}),
        );
        map(&mut m, status(20, 3));
        let used = m.turn_usage().unwrap();
        assert_eq!((used.input_other, used.output, used.input_cache_read, used.total()), (35, 6, 3, 44));
        map(&mut m, json!({"type":"TurnBegin","payload":{"user_input":"again"}}));
        assert_eq!(m.turn_usage(), None, "a new turn counts afresh");
    }

    #[test]
    fn subagent_steps_stay_inside_the_parent_call() {
        let mut m = EventMapper::new(PathBuf::from("/w"), false);
        let inner = json!({"type":"SubagentEvent","payload":{"parent_tool_call_id":"t","agent_id":"a1",
            "subagent_type":"explore","event":{"type":"ContentPart","payload":{"type":"text","text":"x"}}}});
        assert!(map(&mut m, inner).is_empty());
    }
}
