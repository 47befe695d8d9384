//! Fixed prompt texts, written for kiwi and compiled into the binary.
//!
//! Invariant: the texts are used as-is (no placeholders); callers add their own context, e.g.
//! the compaction request appends [`COMPACTION_INSTRUCTIONS`] after the numbered messages.

/// The default agent's system prompt template (`${NAME}` placeholders, see `system_prompt`).
pub const SYSTEM: &str = include_str!("prompts/system.md");

/// System prompt of the compaction LLM call (one line).
pub const COMPACTION_SYSTEM: &str = include_str!("prompts/compaction_system.md");

/// Final text part of the compaction request: what the summary must contain.
pub const COMPACTION_INSTRUCTIONS: &str = include_str!("prompts/compaction.md");

/// Leading `<system>` note of the user message that replaces compacted history.
pub const COMPACTED_NOTE: &str = include_str!("prompts/compacted_note.md");

/// User prompt of the nested `/init` turn: analyze the project and write `AGENTS.md`.
pub const INIT: &str = include_str!("prompts/init.md");

/// Follow-up prompt when a subagent's final summary is shorter than 200 characters.
pub const SUBAGENT_ELABORATE: &str = include_str!("prompts/subagent_elaborate.md");

/// The `<system>` note appended after a D-Mail reverted the context; `message` is the D-Mail.
pub fn dmail_note(message: &str) -> String {
    format!(
        "<system>You just received a D-Mail from your future self. The conversation was rolled back to an \
         earlier checkpoint; your future self sent this message to help you do better this time:\n\n\
         {message}\n\nDo not mention the D-Mail to the user.</system>"
    )
}

/// The user message recorded after `/init`: a `<system>` note plus the current `AGENTS.md`
/// (the literal text `None` when there is none).
pub fn init_done_note(agents_md: Option<&str>) -> String {
    format!(
        "<system>The user ran /init: the project was analyzed and AGENTS.md was written. Its current \
         content follows.</system>\n{}",
        agents_md.unwrap_or("None")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_present() {
        for p in [SYSTEM, COMPACTION_INSTRUCTIONS, COMPACTED_NOTE, INIT, SUBAGENT_ELABORATE] {
            assert!(p.trim().len() > 40);
        }
        assert_eq!(COMPACTION_SYSTEM.trim().lines().count(), 1);
        assert!(COMPACTED_NOTE.trim().starts_with("<system>") && COMPACTED_NOTE.trim().ends_with("</system>"));
        assert!(INIT.contains("AGENTS.md"));
        assert!(dmail_note("try X").contains("\n\ntry X\n\n"));
        assert!(init_done_note(None).ends_with("</system>\nNone"));
        assert!(init_done_note(Some("# A")).ends_with("\n# A"));
    }
}
