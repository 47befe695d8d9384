//! Hooks (`docs/protocol-1.10.md` §5): commands from the config file and client subscriptions that run at
//! fixed points of a session and may block what comes next.
//!
//! This module holds who is hooked to what and decides which hooks a point triggers.
//! Invariants: matching is a regex search anywhere in the value (empty matcher: everything; a
//! matcher that is not a valid regex matches nothing — Rust's `regex` syntax, which has no
//! look-around or back-references, stands in for Python's `re`); config hooks of one event are
//! de-duplicated by command (first kept); client subscriptions are only ever added; before the
//! client's handshake nothing is announced and no client hook is asked.

pub mod command;
pub mod runner;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

pub use runner::{Decision, HookRunner, input};

use crate::config::HookConfig;
use crate::llm::pyfmt::py_repr_str;
use crate::protocol::{DisplayBlock, HookEvent, ToolOutput, ToolReturnValue};

/// Characters of a tool's rendered result given to `PostToolUse` hooks.
const TOOL_OUTPUT_CHARS: usize = 2000;

/// A tool's result as the reference renders it for hooks (`is_error=False output='hi\n' …`), cut
/// to 2000 characters.
pub fn tool_output_repr(r: &ToolReturnValue) -> String {
    let output = match &r.output {
        ToolOutput::Text(t) => py_repr_str(t),
        ToolOutput::Parts(parts) => format!(
            "[{}]",
            parts
                .iter()
                .map(|p| match p.as_text() {
                    Some(t) => format!("TextPart(type='text', text={})", py_repr_str(t)),
                    None => "ContentPart(...)".to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let display = r
        .display
        .iter()
        .map(|b| match b {
            DisplayBlock::Brief { text } => format!("BriefDisplayBlock(type='brief', text={})", py_repr_str(text)),
            _ => {
                let kind = serde_json::to_value(b).ok().and_then(|v| v["type"].as_str().map(str::to_string));
                format!("DisplayBlock(type={})", py_repr_str(&kind.unwrap_or_default()))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let extras = if r.extras.is_some() { "{...}" } else { "None" };
    let text = format!(
        "is_error={} output={output} message={} display=[{display}] extras={extras}",
        if r.is_error { "True" } else { "False" },
        py_repr_str(&r.message)
    );
    text.chars().take(TOOL_OUTPUT_CHARS).collect()
}

/// A client's subscription from `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub id: String,
    pub event: HookEvent,
    pub matcher: String,
    /// Seconds to wait for the client's answer.
    pub timeout: u64,
}

/// The hooks one point of the session triggers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matched {
    pub commands: Vec<HookConfig>,
    pub subscriptions: Vec<Subscription>,
}

impl Matched {
    pub fn count(&self) -> usize {
        self.commands.len() + self.subscriptions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }
}

#[derive(Debug, Default)]
pub struct HookRegistry {
    commands: Vec<HookConfig>,
    subscriptions: Mutex<Vec<Subscription>>,
    /// Set by the client's handshake: batches are announced and subscriptions asked from then on.
    connected: AtomicBool,
}

fn matches(matcher: &str, value: &str) -> bool {
    if matcher.is_empty() {
        return true;
    }
    match regex::Regex::new(matcher) {
        Ok(re) => re.is_match(value),
        Err(e) => {
            tracing::debug!("hook matcher `{matcher}` is not a valid regex ({e}); it matches nothing");
            false
        }
    }
}

impl HookRegistry {
    pub fn new(commands: Vec<HookConfig>) -> Self {
        Self { commands, ..Self::default() }
    }

    fn subs(&self) -> std::sync::MutexGuard<'_, Vec<Subscription>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client's handshake: its subscriptions are added and hooks become visible to it.
    pub fn connect(&self, subscriptions: Vec<Subscription>) {
        self.subs().extend(subscriptions);
        self.connected.store(true, Ordering::SeqCst);
    }

    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Hooks per event (config hooks and subscriptions, duplicates counted): events of config
    /// hooks in order of first appearance, then events only subscribed to.
    pub fn configured(&self) -> Vec<(HookEvent, usize)> {
        let mut counts: Vec<(HookEvent, usize)> = Vec::new();
        let subs = self.subs();
        let events = self.commands.iter().map(|c| c.event).chain(subs.iter().map(|s| s.event));
        for event in events {
            match counts.iter_mut().find(|(e, _)| *e == event) {
                Some((_, n)) => *n += 1,
                None => counts.push((event, 1)),
            }
        }
        counts
    }

    /// The hooks `event` with matcher value `target` triggers.
    pub fn matching(&self, event: HookEvent, target: &str) -> Matched {
        let mut commands: Vec<HookConfig> = Vec::new();
        for hook in self.commands.iter().filter(|h| h.event == event && matches(&h.matcher, target)) {
            if !commands.iter().any(|c| c.command == hook.command) {
                commands.push(hook.clone());
            }
        }
        let subscriptions = if self.connected() {
            self.subs().iter().filter(|s| s.event == event && matches(&s.matcher, target)).cloned().collect()
        } else {
            Vec::new()
        };
        Matched { commands, subscriptions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(event: HookEvent, command: &str, matcher: &str) -> HookConfig {
        HookConfig { event, command: command.into(), matcher: matcher.into(), timeout: 30 }
    }

    fn sub(id: &str, event: HookEvent, matcher: &str) -> Subscription {
        Subscription { id: id.into(), event, matcher: matcher.into(), timeout: 30 }
    }

    #[test]
    fn tool_output_renders_like_the_reference() {
        assert_eq!(
            tool_output_repr(&ToolReturnValue::ok("hi\n", "Command executed successfully.")),
            "is_error=False output='hi\\n' message='Command executed successfully.' display=[] extras=None"
        );
        let long = ToolReturnValue::ok("x".repeat(5000), "");
        assert_eq!(tool_output_repr(&long).chars().count(), 2000);
        assert!(
            tool_output_repr(&ToolReturnValue::error("bad", "Oops"))
                .contains("display=[BriefDisplayBlock(type='brief', text='Oops')]")
        );
    }

    #[test]
    fn counts_follow_first_appearance_then_subscriptions() {
        let r = HookRegistry::new(vec![
            hook(HookEvent::UserPromptSubmit, "a", ""),
            hook(HookEvent::PreToolUse, "b", ""),
            hook(HookEvent::UserPromptSubmit, "c", ""),
        ]);
        r.connect(vec![sub("s1", HookEvent::Stop, ""), sub("s2", HookEvent::PreToolUse, "")]);
        r.connect(vec![sub("s3", HookEvent::Stop, "")]);
        assert_eq!(
            r.configured(),
            vec![(HookEvent::UserPromptSubmit, 2), (HookEvent::PreToolUse, 2), (HookEvent::Stop, 2)]
        );
    }

    #[test]
    fn matching_searches_dedups_and_waits_for_the_handshake() {
        let r = HookRegistry::new(vec![
            hook(HookEvent::PreToolUse, "x", "^Sh"),
            hook(HookEvent::PreToolUse, "x", ""),
            hook(HookEvent::PreToolUse, "y", "File"),
            hook(HookEvent::PreToolUse, "z", "(unclosed"),
        ]);
        assert_eq!(r.matching(HookEvent::PreToolUse, "Shell").commands.len(), 1, "same command once");
        assert_eq!(r.matching(HookEvent::PreToolUse, "WriteFile").commands.len(), 2, "search, not full match");
        assert!(r.matching(HookEvent::Stop, "").is_empty());
        let subscribed = vec![sub("s", HookEvent::PreToolUse, "Shell")];
        assert!(r.matching(HookEvent::PreToolUse, "Shell").subscriptions.is_empty());
        r.connect(subscribed);
        assert_eq!(r.matching(HookEvent::PreToolUse, "Shell").count(), 2);
        assert!(r.matching(HookEvent::PreToolUse, "Grep").subscriptions.is_empty());
    }
}
