//! Repeated tool calls (`docs/protocol-1.10.md` §11). Within a step, identical calls (same tool, same
//! canonical arguments) run once and every copy gets the original's result. Across steps, a call
//! identical to the one before it extends a streak; from the 3rd call of a streak the model is
//! reminded (more firmly at the 5th and 8th), and from the 12th the turn ends after that step.
//! The thresholds are the reference's; the wording is ours.

use serde_json::Value;

use crate::protocol::{ContentPart, ToolOutput, ToolReturnValue};

/// A streak this long ends the turn after its step.
pub const STOP_AT: u32 = 12;

/// The identity of a call: its tool and its arguments as compact JSON with sorted keys.
/// Arguments that are not JSON are compared as written.
pub fn call_key(name: &str, arguments: Option<&str>) -> String {
    let arguments = arguments.unwrap_or("").trim();
    let canonical = match serde_json::from_str::<Value>(if arguments.is_empty() { "{}" } else { arguments }) {
        Ok(value) => canonical_json(&value),
        Err(_) => arguments.to_string(),
    };
    format!("{name}\u{0}{canonical}")
}

fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), canonical_json(&map[k.as_str()])))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The streak of identical calls across the steps of one turn.
#[derive(Debug, Default)]
pub struct RepeatTracker {
    last: Option<String>,
    streak: u32,
}

impl RepeatTracker {
    /// Records the next (distinct) call of the turn; returns the length of its streak.
    pub fn observe(&mut self, key: &str) -> u32 {
        if self.last.as_deref() == Some(key) {
            self.streak += 1;
        } else {
            self.last = Some(key.to_string());
            self.streak = 1;
        }
        self.streak
    }
}

/// The reminder a call gets as the `streak`-th identical call in a row, if any.
pub fn reminder(streak: u32) -> Option<String> {
    let advice = match streak {
        0..=2 => return None,
        3..=4 => "If it is not giving you what you need, try something different.",
        5..=7 => {
            "Repeating it will not change the result: change the arguments, use another tool, or explain \
                  to the user what is blocking you."
        }
        8..=11 => {
            "Stop repeating this call now. Decide with what you already have or tell the user what you \
                   need; the turn will be ended if the same call keeps coming."
        }
        _ => "The turn ends after this step because the same call was repeated too often.",
    };
    Some(format!(
        "<system-reminder>This is call number {streak} in a row of the same tool with the same arguments. \
         {advice}</system-reminder>"
    ))
}

/// Appends `note` to what the model reads of a result.
pub fn append_note(result: &mut ToolReturnValue, note: &str) {
    match &mut result.output {
        ToolOutput::Text(text) => {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(note);
        }
        ToolOutput::Parts(parts) => parts.push(ContentPart::text(note)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_member_order_and_spacing() {
        assert_eq!(
            call_key("Shell", Some(r#"{"b":1, "a":{"y":2,"x":[1, 2]}}"#)),
            call_key("Shell", Some(r#"{"a":{"x":[1,2],"y":2},"b":1}"#))
        );
        assert_ne!(call_key("Shell", Some(r#"{"a":1}"#)), call_key("Glob", Some(r#"{"a":1}"#)));
        assert_ne!(call_key("Shell", Some(r#"{"a":1}"#)), call_key("Shell", Some(r#"{"a":2}"#)));
        assert_eq!(call_key("Think", None), call_key("Think", Some("  ")));
        assert_eq!(call_key("X", Some("{not json")), "X\u{0}{not json");
    }

    #[test]
    fn streaks_count_identical_calls_in_a_row() {
        let mut t = RepeatTracker::default();
        assert_eq!([t.observe("a"), t.observe("a"), t.observe("b"), t.observe("a"), t.observe("a")], [1, 2, 1, 1, 2]);
    }

    #[test]
    fn reminders_escalate_from_the_third_call() {
        assert_eq!((reminder(1), reminder(2)), (None, None));
        let levels: Vec<String> = [3, 4, 5, 8, 12].iter().map(|n| reminder(*n).unwrap()).collect();
        assert_eq!(levels[0].replace('3', "4"), levels[1]);
        assert!(levels[2].contains("will not change"));
        assert!(levels[3].contains("Stop repeating"));
        assert!(levels[4].contains("turn ends"));
        assert!(levels.iter().all(|l| l.starts_with("<system-reminder>") && l.ends_with("</system-reminder>")));
    }

    #[test]
    fn notes_go_after_the_output() {
        let mut r = ToolReturnValue::ok("out", "");
        append_note(&mut r, "note");
        assert_eq!(r.output, ToolOutput::Text("out\nnote".into()));
    }
}
