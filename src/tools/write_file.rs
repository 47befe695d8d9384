//! `WriteFile`: creates, overwrites or appends to a file after approval (`tools.md` §6).
//!
//! Invariants: the approval request and the result carry the same diff blocks; nothing is written
//! before approval; the action is `edit file` inside the work dir (lexically) and `edit file
//! outside of working directory` elsewhere, so "approve for session" never covers both.

use std::io::Write;
use std::path::Path;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diff::diff_blocks;
use super::read_file::{check_path, read_text_universal};
use super::{ToolCallContext, TypedTool, paths};
use crate::protocol::ToolReturnValue;

pub(crate) const EDIT: &str = "edit file";
pub(crate) const EDIT_OUTSIDE: &str = "edit file outside of working directory";

// `Serialize` lets schemars show the model `"default": "overwrite"` (tools.md §6).
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

impl TypedTool for WriteFile {
    type Params = WriteFileParams;
    const NAME: &'static str = "WriteFile";

    fn description(&self) -> String {
        include_str!("desc/write_file.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: WriteFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let work_dir = ctx.env.work_dir.clone();
            let given = params.path.clone();
            let path = match check_path(&work_dir, &given, "write a file") {
                Ok(p) => p,
                Err(e) => return e,
            };
            if !path.parent().is_some_and(Path::exists) {
                return ToolReturnValue::error(
                    format!("`{given}` parent directory does not exist."),
                    "Parent directory not found",
                );
            }
            let failed = |e: std::io::Error| {
                ToolReturnValue::error(format!("Failed to write to {given}. Error: {e}"), "Failed to write file")
            };
            let old_text = if path.exists() {
                match read_text_universal(&path) {
                    Ok(t) => t,
                    Err(e) => return failed(e),
                }
            } else {
                String::new()
            };
            let new_text = match params.mode {
                WriteMode::Overwrite => params.content.clone(),
                WriteMode::Append => format!("{old_text}{}", params.content),
            };
            let shown = path.to_string_lossy().into_owned();
            let blocks = diff_blocks(&shown, &old_text, &new_text);
            let action = if paths::is_within(&path, &work_dir) { EDIT } else { EDIT_OUTSIDE };
            if !ctx.approve("WriteFile", action, format!("Write file `{shown}`"), blocks.clone()).await {
                return ToolReturnValue::rejected();
            }
            let written = match params.mode {
                WriteMode::Overwrite => std::fs::write(&path, params.content.as_bytes()),
                WriteMode::Append => std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(params.content.as_bytes())),
            };
            if let Err(e) = written {
                return failed(e);
            }
            let size = match std::fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) => return failed(e),
            };
            let verb = match params.mode {
                WriteMode::Overwrite => "overwritten",
                WriteMode::Append => "appended to",
            };
            ToolReturnValue::ok("", format!("File successfully {verb}. Current size: {size} bytes."))
                .with_display(blocks)
        })
    }
}
