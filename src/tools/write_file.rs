//! `WriteFile`: creates, overwrites or appends to a file after approval (`docs/tools.md` §6).
//!
//! Invariants:
//! - The approval request and the result carry the same diff blocks (unless an append had to
//!   follow a concurrent change, when the result shows what was really written); nothing is
//!   written before approval.
//! - The target is resolved first (links followed, parent canonicalized): the approval names the
//!   real path, its action is `edit file` only when that path is inside the work dir, and the
//!   write lands there (`docs/tools.md` §19.6; `docs/tools.md` §1 decides lexically).
//! - Only a regular file of at most [`MAX_EDIT_BYTES`] is read, without blocking; `content` and
//!   the resulting file are capped alike (`docs/tools.md` §19.4, §19.5).
//! - After approval the file is read again: an overwrite approved against a content that changed
//!   meanwhile is refused (the user's change is kept), an append goes to the current end; the new
//!   content replaces the file atomically (temp file, fsync, rename), owner and mode kept, so a
//!   failed write leaves the file as it was (`docs/tools.md` §19.3).
//! - All file work and the diff run off the async thread and stop when the call is dropped.

pub(crate) mod common;
pub(crate) mod disk;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use self::common::{
    Editor, MAX_EDIT_BYTES, MAX_EDIT_LABEL, Step, action_for, changed, lossy_text, not_utf8, off_thread, stopped,
    too_large, utf8_text,
};
use self::disk::Snapshot;
use super::diff::diff_blocks_until;
use super::read_file::check_path;
use super::{ToolCallContext, TypedTool};
use crate::protocol::{DisplayBlock, ToolReturnValue};
use crate::session::rewind::EditJournal;
use crate::tools::client_files::ClientFileAccess;

// `Serialize` lets schemars show the model `"default": "overwrite"` (docs/tools.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    // Replace the whole file.
    #[default]
    Overwrite,
    // Add the content at the end of the file.
    Append,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileParams {
    /// Path of the file; absolute is recommended, relative paths are taken from the working
    /// directory.
    pub path: String,
    /// The text to write.
    pub content: String,
    /// `overwrite` replaces the file (creating it if needed), `append` adds to its end.
    #[serde(default)]
    pub mode: WriteMode,
}

pub struct WriteFile;

/// What the approval was asked for.
struct Prepared {
    real: PathBuf,
    shown: String,
    action: &'static str,
    /// The file as the diff saw it (`None`: it did not exist).
    old: Option<Snapshot>,
    blocks: Vec<DisplayBlock>,
}

impl TypedTool for WriteFile {
    type Params = WriteFileParams;
    const NAME: &'static str = "WriteFile";

    fn description(&self) -> String {
        include_str!("desc/write_file.md").trim().replace("{max_size}", MAX_EDIT_LABEL)
    }

    fn run<'a>(&'a self, params: WriteFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let work_dir = ctx.env.work_dir.clone();
            let given = params.path.clone();
            let lexical = match check_path(&work_dir, &given, "write a file") {
                Ok(p) => p,
                Err(e) => return e,
            };
            let mode = params.mode;
            let content = Arc::new(params.content);
            let client = ctx.host.client_files().map(ClientFileAccess::new);
            let journal = ctx.host.edit_journal();
            let prepared = {
                let (given, content, client) = (given.clone(), Arc::clone(&content), client.clone());
                off_thread(move |stop| prepare(&work_dir, &lexical, &given, &content, mode, client.as_ref(), stop))
                    .await
            };
            let prepared = match prepared {
                Ok(p) => p,
                Err(r) => return *r,
            };
            if let Some(refused) = super::sandbox_gate::write_refusal(ctx, &prepared.real) {
                return refused;
            }
            let description = format!("Write file `{}`", prepared.shown);
            if !ctx.approve("WriteFile", prepared.action, description, prepared.blocks.clone()).await {
                return ToolReturnValue::rejected();
            }
            off_thread(move |stop| commit(prepared, &given, &content, mode, client.as_ref(), journal.as_deref(), stop))
                .await
                .unwrap_or_else(|r| *r)
        })
    }
}

/// Before approval: resolve, read the current file (bounded), diff.
fn prepare(
    work_dir: &Path,
    lexical: &Path,
    given: &str,
    content: &str,
    mode: WriteMode,
    client: Option<&ClientFileAccess>,
    stop: &AtomicBool,
) -> Step<Prepared> {
    if content.len() as u64 > MAX_EDIT_BYTES {
        return Err(too_large(format!("The content is {} bytes", content.len())));
    }
    let real = disk::resolve_for_write(lexical).map_err(|e| Editor::Write.refusal(e, given))?;
    let old = disk::read_through(&real, MAX_EDIT_BYTES, client).map_err(|e| Editor::Write.refusal(e, given))?;
    let old_text = match (&old, mode) {
        (None, _) => String::new(),
        (Some(s), WriteMode::Append) => appendable(s, given, content)?,
        // Nothing of the old bytes survives an overwrite: replacement characters only show in the diff.
        (Some(s), WriteMode::Overwrite) => lossy_text(&s.bytes),
    };
    let new_text = match mode {
        WriteMode::Overwrite => content.to_string(),
        WriteMode::Append => format!("{old_text}{content}"),
    };
    let shown = real.to_string_lossy().into_owned();
    let blocks = diff_blocks_until(&shown, &old_text, &new_text, stop).ok_or_else(stopped)?;
    let action = action_for(&real, work_dir);
    Ok(Prepared { real, shown, action, old, blocks })
}

/// The text of a file `content` may be appended to: UTF-8 (an append would otherwise mix
/// encodings; `docs/tools.md` §6 decodes with replacement, §19.6 refuses), and small
/// enough that the result stays under the limit.
fn appendable(file: &Snapshot, given: &str, content: &str) -> Step<String> {
    let text = utf8_text(&file.bytes).ok_or_else(|| not_utf8(given))?;
    let size = file.bytes.len() as u64 + content.len() as u64;
    if size > MAX_EDIT_BYTES {
        return Err(too_large(format!("`{given}` would be {size} bytes after the append")));
    }
    Ok(text)
}

/// After approval: read the file again, check it is still what was approved (overwrite) or
/// append to what it is now, and replace it atomically.
fn commit(
    p: Prepared,
    given: &str,
    content: &str,
    mode: WriteMode,
    client: Option<&ClientFileAccess>,
    journal: Option<&EditJournal>,
    stop: &AtomicBool,
) -> Step<ToolReturnValue> {
    let current = disk::read_through(&p.real, MAX_EDIT_BYTES, client).map_err(|e| Editor::Write.refusal(e, given))?;
    let unchanged = current.as_ref().map(|s| &s.bytes) == p.old.as_ref().map(|s| &s.bytes);
    let appended;
    let bytes: &[u8] = match mode {
        // Overwriting a content the user did not see in the diff would silently drop their change.
        WriteMode::Overwrite if !unchanged => return Err(changed(given, "write")),
        WriteMode::Overwrite => content.as_bytes(),
        WriteMode::Append => {
            let mut all = match &current {
                Some(s) => {
                    appendable(s, given, content)?;
                    s.bytes.clone()
                }
                None => Vec::new(),
            };
            all.extend_from_slice(content.as_bytes());
            appended = all;
            &appended
        }
    };
    let like = current.as_ref().map(|s| &s.meta);
    if current.is_some() {
        disk::check_writable(&p.real).map_err(|e| Editor::Write.write_failed(given, &e, true))?;
    }
    disk::write_through(&p.real, bytes, like, client)
        .map_err(|e| Editor::Write.write_failed(given, &e, current.is_some()))?;
    // What the file was, for an undo (`docs/sessions.md` §9).
    if let Some(journal) = journal {
        journal.record(&p.real, current.as_ref().map(|s| s.bytes.as_slice()), bytes);
    }
    let blocks = if unchanged {
        p.blocks
    } else {
        // An append that followed a concurrent change: show what was really written.
        let old_text = current.as_ref().map(|s| lossy_text(&s.bytes)).unwrap_or_default();
        diff_blocks_until(&p.shown, &old_text, &format!("{old_text}{content}"), stop).unwrap_or_default()
    };
    let verb = match mode {
        WriteMode::Overwrite => "overwritten",
        WriteMode::Append => "appended to",
    };
    let message = format!("File successfully {verb}. Current size: {} bytes.", bytes.len());
    Ok(ToolReturnValue::ok("", message).with_display(blocks))
}
