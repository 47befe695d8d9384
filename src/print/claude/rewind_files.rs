//! `rewind_files {user_message_id, dry_run?}` (`docs/print-mode.md`, "Session APIs"): the files
//! kiwi's edit tools (`WriteFile`, `StrReplaceFile`) changed since that user message are put
//! back as `/undo` puts them back, and the conversation stays as it is — Claude Code's file
//! checkpoints, which the SDK turns on with `enable_file_checkpointing`
//! (`CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`).
//!
//! Answers, with Claude Code's texts: `File rewinding is not enabled.`, `No file checkpoint found
//! for this message.` (a uuid that is no prompt of this session, in this run or an earlier one),
//! `Failed to rewind: …` (nothing could be put back); otherwise `{canRewind: true,
//! filesChanged}` and, when some file was left as it is, `error` naming each with the reason
//! (a file changed since kiwi wrote it, one outside the session's folders, one whose copy was
//! not kept). `dry_run` lists the files a rewind would touch and changes nothing. What Shell
//! commands changed is never restored (as in Claude Code, whose checkpoints follow its edit
//! tools only).

use std::sync::Arc;

use serde_json::{Value, json};

use super::ledger::{self, Ledger, Point};
use crate::session::rewind::turn_starts;
use crate::soul::TurnDriver;

/// Set by the SDK's `enable_file_checkpointing`.
const ENABLE_ENV: &str = "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING";

fn enabled() -> bool {
    std::env::var(ENABLE_ENV).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Serves one `rewind_files` request.
pub async fn rewind_files(driver: &Arc<TurnDriver>, ledger: &Ledger, request: &Value) -> Result<Value, String> {
    if !enabled() {
        return Err("File rewinding is not enabled.".into());
    }
    let Some(id) = request.get("user_message_id").and_then(Value::as_str) else {
        return Err("Invalid rewind_files request: user_message_id must be a string".into());
    };
    let dry_run = request.get("dry_run").and_then(Value::as_bool).unwrap_or(false);
    let dir = ledger.dir().to_path_buf();
    let starts = turn_starts(&dir.join("wire.jsonl")).map_err(|e| format!("Failed to rewind: {e}"))?;
    let records = ledger::load(&dir, starts.len() as u64);
    let no_checkpoint = || "No file checkpoint found for this message.".to_string();
    let turn = match ledger::find(&records, id.trim()) {
        Some((record, Point::Prompt)) => record.turn,
        _ => return Err(no_checkpoint()),
    };
    let offset = starts.iter().find(|s| s.index == turn).map(|s| s.offset).ok_or_else(no_checkpoint)?;
    if dry_run {
        let Some(journal) = driver.agent().journal.clone() else {
            return Ok(json!({"canRewind": true, "filesChanged": []}));
        };
        let plan = journal.plan_from(offset).map_err(|e| format!("Failed to rewind: {e}"))?;
        let files: Vec<String> = plan.files.iter().map(|c| c.path.display().to_string()).collect();
        return Ok(json!({"canRewind": true, "filesChanged": files}));
    }
    let report = match driver.rewind_files(offset).await {
        Err(_busy) => return Err("Failed to rewind: a turn is running; rewind between turns".into()),
        Ok(Err(e)) => return Err(format!("Failed to rewind: {e}")),
        Ok(Ok(report)) => report,
    };
    let left: Vec<String> = report.not_restored.iter().map(|n| format!("{} ({})", n.path, n.reason)).collect();
    let changed: Vec<String> = report.restored.iter().chain(&report.deleted).cloned().collect();
    if changed.is_empty() && !left.is_empty() {
        return Err(format!("Failed to rewind: not restored: {}", left.join("; ")));
    }
    let mut answer = json!({"canRewind": true, "filesChanged": changed});
    if !left.is_empty() {
        let text = format!("Not restored: {}", left.join("; "));
        crate::print::common::stderr_line(&format!("kiwi: rewind_files: {text}"));
        answer["error"] = Value::from(text);
    }
    Ok(answer)
}
