//! `StrReplaceFile`: exact string replacements in an existing file (`tools.md` §7).
//!
//! Invariants: edits apply in order to the evolving text; a no-op edit set is an error and asks
//! for no approval; the file is read with universal newlines, so CRLF files are written back with
//! LF (reference behavior); replacement counts are taken against the original text.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::diff::diff_blocks;
use super::read_file::{check_path, read_text_universal};
use super::write_file::{EDIT, EDIT_OUTSIDE};
use super::{ToolCallContext, TypedTool, paths};
use crate::protocol::ToolReturnValue;

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

impl TypedTool for StrReplaceFile {
    type Params = StrReplaceFileParams;
    const NAME: &'static str = "StrReplaceFile";

    fn description(&self) -> String {
        include_str!("desc/str_replace_file.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: StrReplaceFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let work_dir = ctx.env.work_dir.clone();
            let given = params.path.clone();
            let path = match check_path(&work_dir, &given, "edit a file") {
                Ok(p) => p,
                Err(e) => return e,
            };
            let failed = |e: std::io::Error| {
                ToolReturnValue::error(format!("Failed to edit. Error: {e}"), "Failed to edit file")
            };
            match std::fs::metadata(&path) {
                Err(e) if paths::is_missing(&e) => {
                    return ToolReturnValue::error(format!("`{given}` does not exist."), "File not found");
                }
                Err(e) => return failed(e),
                Ok(m) if !m.is_file() => {
                    return ToolReturnValue::error(format!("`{given}` is not a file."), "Invalid path");
                }
                Ok(_) => {}
            }
            let original = match read_text_universal(&path) {
                Ok(t) => t,
                Err(e) => return failed(e),
            };
            let edits = params.edit.into_vec();
            let mut content = original.clone();
            for edit in &edits {
                content = if edit.replace_all {
                    content.replace(&edit.old, &edit.new)
                } else {
                    content.replacen(&edit.old, &edit.new, 1)
                };
            }
            if content == original {
                return ToolReturnValue::error(
                    "No replacements were made. The old string was not found in the file.",
                    "No replacements made",
                );
            }
            let shown = path.to_string_lossy().into_owned();
            let blocks = diff_blocks(&shown, &original, &content);
            let action = if paths::is_within(&path, &work_dir) { EDIT } else { EDIT_OUTSIDE };
            if !ctx.approve("StrReplaceFile", action, format!("Edit file `{shown}`"), blocks.clone()).await {
                return ToolReturnValue::rejected();
            }
            if let Err(e) = std::fs::write(&path, content.as_bytes()) {
                return failed(e);
            }
            let total: usize = edits
                .iter()
                .map(|e| {
                    if e.replace_all {
                        original.matches(e.old.as_str()).count()
                    } else {
                        usize::from(original.contains(e.old.as_str()))
                    }
                })
                .sum();
            ToolReturnValue::ok(
                "",
                format!("File successfully edited. Applied {} edit(s) with {total} total replacement(s).", edits.len()),
            )
            .with_display(blocks)
        })
    }
}
