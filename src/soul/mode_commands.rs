//! Slash commands that switch session modes (`docs/protocol-1.10.md` §4.5): `/yolo`, `/afk`, `/plan`, and
//! the plan-mode reminders the model gets while plan mode is on (§6.3).
//!
//! Invariants: every switch is persisted through the session state before it is announced; a
//! plan-mode switch is followed by `StatusUpdate{plan_mode}` (view and clear are not switches);
//! reminders go into the context only (never on the wire): a full one when plan mode is first
//! seen on, then one after at least five assistant messages, every fifth of them full.

use super::Soul;
use super::commands::say;
use super::sink::EventSink;
use crate::llm::{Message, Role};
use crate::protocol::{Event, StatusUpdate};

const AFK_OFF_NOTE: &str = "<system-reminder>The user is back: afk mode is off. Ask before acting on anything the user \
                            should decide, and expect approvals again.</system-reminder>";

/// Where the reminders stand: the history length at the last one and how many were given.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanReminders {
    last_len: usize,
    given: u32,
}

const REMIND_AFTER: usize = 5;
const FULL_EVERY: u32 = 5;

impl Soul {
    pub(super) async fn toggle_yolo(&mut self, sink: &EventSink) {
        let state = &self.agent.state;
        let on = !state.yolo();
        state.set_yolo(on);
        let text = match (on, state.afk()) {
            (true, _) => "You only live once! All actions will be auto-approved.",
            (false, false) => "You only die once! Actions will require approval.",
            (false, true) => {
                "Yolo disabled, but afk is still on — tool calls remain auto-approved. Use /afk to turn off afk."
            }
        };
        say(sink, text).await;
    }

    pub(super) async fn toggle_afk(&mut self, sink: &EventSink) {
        let state = &self.agent.state;
        let on = !state.afk();
        state.set_afk(on);
        let text = match (on, state.yolo()) {
            (true, _) => "afk mode enabled. AskUserQuestion will be auto-dismissed and tool calls auto-approved.",
            (false, false) => "afk mode disabled. You are back at the terminal.",
            (false, true) => "afk mode disabled. You are back at the terminal. Yolo is still on.",
        };
        if !on {
            self.context.append(Message::user_text(AFK_OFF_NOTE));
        }
        say(sink, text).await;
    }

    pub(super) async fn plan_command(&mut self, args: &str, sink: &EventSink) {
        let state = self.agent.state.clone();
        let sub = args.trim().to_lowercase();
        match sub.as_str() {
            "view" => {
                let text = state
                    .plan()
                    .file
                    .and_then(|f| std::fs::read_to_string(f).ok())
                    .unwrap_or_else(|| "No plan file found for this session.".into());
                say(sink, &text).await;
            }
            "clear" => {
                if let Some(file) = state.plan().file
                    && let Err(e) = std::fs::remove_file(&file)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!("cannot remove {}: {e}", file.display());
                }
                say(sink, "Plan cleared.").await;
            }
            "on" => {
                let view = state.set_plan_mode(true);
                let file = view.file.map(|f| f.display().to_string()).unwrap_or_default();
                say(sink, &format!("Plan mode ON. Plan file: {file}")).await;
                sink.emit(Event::StatusUpdate(StatusUpdate::plan_mode(true))).await;
            }
            "off" => self.plan_off(sink).await,
            _ if state.plan_mode() => self.plan_off(sink).await,
            _ => {
                let view = state.set_plan_mode(true);
                let file = view.file.map(|f| f.display().to_string()).unwrap_or_default();
                let text = format!(
                    "Plan mode ON. Write your plan to: {file}\nUse ExitPlanMode when done, or /plan off to exit manually."
                );
                say(sink, &text).await;
                sink.emit(Event::StatusUpdate(StatusUpdate::plan_mode(true))).await;
            }
        }
    }

    async fn plan_off(&mut self, sink: &EventSink) {
        self.agent.state.set_plan_mode(false);
        say(sink, "Plan mode OFF. All tools are now available.").await;
        sink.emit(Event::StatusUpdate(StatusUpdate::plan_mode(false))).await;
    }

    /// Before an LLM call: reminds the model of plan mode when it is due.
    pub(super) fn remind_plan_mode(&mut self) {
        let plan = self.agent.state.plan();
        let (true, Some(file)) = (plan.active, plan.file) else {
            self.plan_reminders = None;
            return;
        };
        let history = self.context.history();
        let full = match self.plan_reminders {
            None => true,
            Some(r) => {
                // A cleared or compacted context starts the count again.
                let since = history.get(r.last_len..).unwrap_or(history);
                if since.iter().filter(|m| m.role == Role::Assistant).count() < REMIND_AFTER {
                    return;
                }
                (r.given + 1) % FULL_EVERY == 0
            }
        };
        let file = file.display();
        let text = if full {
            format!(
                "<system-reminder>Plan mode is active. Do not change the project yet: read, search and think, then \
                 write your plan to the plan file {file} — the only file you may write now. When the plan is \
                 complete, call ExitPlanMode to present it to the user for approval.</system-reminder>"
            )
        } else {
            format!(
                "<system-reminder>Plan mode is still active: only {file} may be written. Call ExitPlanMode when the \
                 plan is ready.</system-reminder>"
            )
        };
        self.context.append(Message::user_text(text));
        let given = self.plan_reminders.map_or(0, |r| r.given) + 1;
        self.plan_reminders = Some(PlanReminders { last_len: self.context.history().len(), given });
    }
}
