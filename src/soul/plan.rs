//! Plan mode's file and policy (`docs/protocol-1.10.md` §6): where the plan lives, and what a tool call
//! may do while plan mode is on.
//!
//! Invariants: the plan file is `$HOME/.kimi/plans/<slug>.md` (the home dir, not the share dir);
//! a slug is three words of a fixed list joined with `-`, redrawn while the file exists (20
//! tries), then made unique with the plan id; the policy only restricts writes (every tool stays
//! callable): `WriteFile`/`StrReplaceFile` may only touch the current plan file, and writing it
//! needs no approval — granted to that very call (id, tool and arguments), never to its id alone,
//! since another call may carry the same id.

use std::path::{Path, PathBuf};

use rand::seq::IndexedRandom;
use serde_json::Value;

use crate::protocol::ToolReturnValue;
use crate::session::store::home_dir;
use crate::tools::paths;

/// Words the slug is drawn from: fruit and birds, easy to say and to tell apart.
const WORDS: &[&str] = &[
    "apple",
    "apricot",
    "banana",
    "cherry",
    "damson",
    "date",
    "elder",
    "fig",
    "guava",
    "kiwi",
    "lemon",
    "lime",
    "lychee",
    "mango",
    "melon",
    "olive",
    "orange",
    "papaya",
    "peach",
    "pear",
    "plum",
    "quince",
    "rowan",
    "sloe",
    "albatross",
    "bittern",
    "crane",
    "curlew",
    "dunlin",
    "egret",
    "falcon",
    "finch",
    "gannet",
    "heron",
    "ibis",
    "jay",
    "kestrel",
    "lapwing",
    "magpie",
    "merlin",
    "nightjar",
    "oriole",
    "osprey",
    "plover",
    "puffin",
    "raven",
    "robin",
    "shrike",
    "swift",
    "tern",
    "wagtail",
    "warbler",
    "wren",
];

const SLUG_TRIES: usize = 20;

pub fn plans_dir() -> PathBuf {
    home_dir().join(".kimi").join("plans")
}

pub fn plan_file(slug: &str) -> PathBuf {
    plans_dir().join(format!("{slug}.md"))
}

/// A slug whose plan file does not exist yet.
pub fn new_slug(plan_id: &str) -> String {
    let mut rng = rand::rng();
    let mut draw =
        || -> String { (0..3).map(|_| *WORDS.choose(&mut rng).unwrap_or(&"kiwi")).collect::<Vec<_>>().join("-") };
    let mut slug = draw();
    for _ in 1..SLUG_TRIES {
        if !plan_file(&slug).exists() {
            return slug;
        }
        slug = draw();
    }
    if plan_file(&slug).exists() {
        slug = format!("{slug}-{}", &plan_id[..plan_id.len().min(8)]);
    }
    slug
}

/// What plan mode makes of one tool call before it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanVerdict {
    /// Run it as usual.
    Run,
    /// Run it; its approval is granted (a write of the plan file), to this call only.
    RunApproved,
    /// Do not run it; this is its result.
    Blocked(ToolReturnValue),
}

/// The tool policy of `docs/protocol-1.10.md` §6.3 for a call of `tool` with `arguments`.
pub fn check_call(tool: &str, arguments: &Value, plan_file: &Path, work_dir: &Path) -> PlanVerdict {
    match tool {
        "WriteFile" | "StrReplaceFile" => {
            let Some(path) = arguments.get("path").and_then(Value::as_str) else {
                // The tool reports its own argument error.
                return PlanVerdict::Run;
            };
            let target = paths::resolve(work_dir, path);
            if paths::normalize(&target) == paths::normalize(plan_file) {
                PlanVerdict::RunApproved
            } else {
                PlanVerdict::Blocked(blocked(
                    format!("Plan mode is active. You may only edit the current plan file: `{}`.", plan_file.display()),
                    "Plan mode restriction",
                ))
            }
        }
        "TaskStop" => {
            PlanVerdict::Blocked(blocked("TaskStop is not available in plan mode.".into(), "Blocked in plan mode"))
        }
        _ => PlanVerdict::Run,
    }
}

fn blocked(message: String, brief: &str) -> ToolReturnValue {
    ToolReturnValue::blocked(message, brief)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn slugs_are_three_words() {
        let slug = new_slug("0123456789abcdef");
        assert_eq!(slug.split('-').count(), 3, "{slug}");
        assert!(plan_file(&slug).ends_with(format!("{slug}.md")));
    }

    #[test]
    fn only_the_plan_file_may_be_written() {
        let plan = Path::new("/h/.kimi/plans/a-b-c.md");
        let work = Path::new("/w");
        assert_eq!(
            check_call("WriteFile", &json!({"path": "/h/.kimi/plans/./a-b-c.md"}), plan, work),
            PlanVerdict::RunApproved
        );
        let PlanVerdict::Blocked(r) = check_call("StrReplaceFile", &json!({"path": "src/x.rs"}), plan, work) else {
            panic!("not blocked")
        };
        assert_eq!(
            r.message,
            "Plan mode is active. You may only edit the current plan file: `/h/.kimi/plans/a-b-c.md`."
        );
        assert_eq!(r.kind(), crate::protocol::ResultKind::Blocked);
        assert!(matches!(check_call("TaskStop", &json!({}), plan, work), PlanVerdict::Blocked(_)));
        assert_eq!(check_call("Shell", &json!({"command": "rm -rf /"}), plan, work), PlanVerdict::Run);
        assert_eq!(check_call("WriteFile", &json!({"path": 5}), plan, work), PlanVerdict::Run);
    }
}
