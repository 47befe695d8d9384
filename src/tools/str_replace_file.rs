//! `StrReplaceFile`: exact string replacements in an existing file (`docs/tools.md` §7).
//!
//! Invariants:
//! - Edits apply in order to the evolving text; a no-op edit set is an error and asks for no
//!   approval; the file is read with universal newlines, so CRLF files are written back with LF
//!   (reference behavior); replacement counts are taken against the original text.
//! - Only a regular UTF-8 file of at most [`MAX_EDIT_BYTES`] is edited, and no intermediate text
//!   may exceed that size (`docs/tools.md` §19.4, §19.5, §19.6; `docs/tools.md` §7 decodes with replacement).
//! - The approval names the resolved path and says `edit file` only when it is inside the work dir
//!   (`docs/tools.md` §19.6; `docs/tools.md` §1 decides lexically).
//! - After approval the file is read again. If it changed, the edits are re-applied to the current
//!   text when every `old` text occurs as often as before, otherwise nothing is written and the
//!   model is told to re-read: the user's concurrent change is never lost (`docs/tools.md` §19.3).
//! - The new text replaces the file atomically (temp file, fsync, rename; owner and mode kept).
//! - All file work and the diff run off the async thread and stop when the call is dropped.

mod edits;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::client_files::ClientFileAccess;
use super::diff::diff_blocks_until;
use super::read_file::check_path;
use super::write_file::common::{
    Editor, MAX_EDIT_BYTES, MAX_EDIT_LABEL, Step, action_for, changed, not_utf8, off_thread, stopped, too_large,
    utf8_text,
};
use super::write_file::disk::{self, DiskError, Snapshot};
use super::{ToolCallContext, TypedTool};
use crate::protocol::{DisplayBlock, ToolReturnValue};
use crate::session::rewind::EditJournal;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Edit {
    /// The exact text to find.
    pub old: String,
    /// The text to put in its place.
    pub new: String,
    /// Replace every occurrence instead of only the first one.
    #[serde(default)]
    pub replace_all: bool,
}

/// One edit or a list of edits applied in order.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Edits {
    One(Edit),
    Many(Vec<Edit>),
}

impl Edits {
    fn into_vec(self) -> Vec<Edit> {
        match self {
            Edits::One(e) => vec![e],
            Edits::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StrReplaceFileParams {
    /// Path of the file; absolute is recommended, relative paths are taken from the working
    /// directory.
    pub path: String,
    /// One edit, or a list of edits applied one after the other.
    pub edit: Edits,
}

pub struct StrReplaceFile;

/// What the approval was asked for.
struct Prepared {
    real: PathBuf,
    shown: String,
    action: &'static str,
    /// The file as the diff saw it.
    old: Snapshot,
    /// The edited text and the occurrence counts a re-application must find again.
    edited: edits::Applied,
    replacements: usize,
    blocks: Vec<DisplayBlock>,
}

impl TypedTool for StrReplaceFile {
    type Params = StrReplaceFileParams;
    const NAME: &'static str = "StrReplaceFile";

    fn description(&self) -> String {
        include_str!("desc/str_replace_file.md").trim().replace("{max_size}", MAX_EDIT_LABEL)
    }

    fn run<'a>(&'a self, params: StrReplaceFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let work_dir = ctx.env.work_dir.clone();
            let given = params.path.clone();
            let lexical = match check_path(&work_dir, &given, "edit a file") {
                Ok(p) => p,
                Err(e) => return e,
            };
            let edits = Arc::new(params.edit.into_vec());
            let client = ctx.host.client_files().map(ClientFileAccess::new);
            let journal = ctx.host.edit_journal();
            let prepared = {
                let (given, edits, client) = (given.clone(), Arc::clone(&edits), client.clone());
                off_thread(move |stop| prepare(&work_dir, &lexical, &given, &edits, client.as_ref(), stop)).await
            };
            let prepared = match prepared {
                Ok(p) => p,
                Err(r) => return *r,
            };
            if let Some(refused) = super::sandbox_gate::write_refusal(ctx, &prepared.real) {
                return refused;
            }
            let description = format!("Edit file `{}`", prepared.shown);
            if !ctx.approve("StrReplaceFile", prepared.action, description, prepared.blocks.clone()).await {
                return ToolReturnValue::rejected();
            }
            off_thread(move |stop| commit(prepared, &given, &edits, client.as_ref(), journal.as_deref(), stop))
                .await
                .unwrap_or_else(|r| *r)
        })
    }
}

/// Before approval: resolve, read (bounded, UTF-8 only), apply the edits, diff.
fn prepare(
    work_dir: &Path,
    lexical: &Path,
    given: &str,
    edits: &[Edit],
    client: Option<&ClientFileAccess>,
    stop: &AtomicBool,
) -> Step<Prepared> {
    let refusal = |e| Editor::Replace.refusal(e, given);
    let real = disk::resolve_existing(lexical).map_err(refusal)?;
    let old = disk::read_through(&real, MAX_EDIT_BYTES, client)
        .map_err(refusal)?
        .ok_or_else(|| refusal(DiskError::Missing))?;
    let original = utf8_text(&old.bytes).ok_or_else(|| not_utf8(given))?;
    let edited = edits::apply(&original, edits, MAX_EDIT_BYTES).map_err(|size| too_large_result(given, size))?;
    if edited.text == original {
        return Err(Box::new(ToolReturnValue::error(
            "No replacements were made. The old string was not found in the file.",
            "No replacements made",
        )));
    }
    let shown = real.to_string_lossy().into_owned();
    let blocks = diff_blocks_until(&shown, &original, &edited.text, stop).ok_or_else(stopped)?;
    let replacements = edits::total_replacements(&original, edits);
    let action = action_for(&real, work_dir);
    Ok(Prepared { real, shown, action, old, edited, replacements, blocks })
}

fn too_large_result(given: &str, size: u64) -> Box<ToolReturnValue> {
    too_large(format!("The edit would make `{given}` {size} bytes"))
}

/// After approval: read the file again, follow a concurrent change when the edits still apply
/// exactly, and replace the file atomically.
fn commit(
    p: Prepared,
    given: &str,
    edits: &[Edit],
    client: Option<&ClientFileAccess>,
    journal: Option<&EditJournal>,
    stop: &AtomicBool,
) -> Step<ToolReturnValue> {
    let current = match disk::read_through(&p.real, MAX_EDIT_BYTES, client) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(changed(given, "edit")),
        Err(e) => return Err(Editor::Replace.refusal(e, given)),
    };
    let mut message = format!(
        "File successfully edited. Applied {} edit(s) with {} total replacement(s).",
        edits.len(),
        p.replacements
    );
    let (text, followed) = if current.bytes == p.old.bytes {
        (p.edited.text, None)
    } else {
        let now = utf8_text(&current.bytes).ok_or_else(|| not_utf8(given))?;
        match edits::reapply(&now, edits, &p.edited.counts, MAX_EDIT_BYTES) {
            Ok(Some(text)) => (text, Some(now)),
            Ok(None) => return Err(changed(given, "edit")),
            Err(size) => return Err(too_large_result(given, size)),
        }
    };
    disk::check_writable(&p.real).map_err(|e| Editor::Replace.write_failed(given, &e, true))?;
    disk::write_through(&p.real, text.as_bytes(), Some(&current.meta), client)
        .map_err(|e| Editor::Replace.write_failed(given, &e, true))?;
    // What the file was, for an undo (`docs/sessions.md` §9).
    if let Some(journal) = journal {
        journal.record(&p.real, Some(&current.bytes), text.as_bytes());
    }
    let blocks = match followed {
        None => p.blocks,
        Some(now) => {
            message.push_str(
                " The file had changed while waiting for approval; the edit was applied to its current content.",
            );
            diff_blocks_until(&p.shown, &now, &text, stop).unwrap_or_default()
        }
    };
    Ok(ToolReturnValue::ok("", message).with_display(blocks))
}
