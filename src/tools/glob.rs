//! `Glob`: find paths by a pathlib-style pattern (`docs/tools.md` §8).
//!
//! Semantics follow Python 3.13 `Path.glob(pattern)` as used by the reference:
//! * the pattern is relative, split on `/` (empty and `.` parts dropped, a trailing `/` keeps only
//!   directories); an empty or absolute pattern is an error;
//! * a part with `*`, `?` or `[` is an fnmatch pattern for one name (hidden names included, no
//!   brace expansion, `[!..]` negates, a `[` without `]` is literal), matched with `globset`;
//! * `**` matches zero or more directories without following directory symlinks; as the last
//!   part it yields the directory itself and everything below it;
//! * literal parts are checked with `lstat`, never listed.
//!
//! Invariants: results are sorted component-wise and deduplicated; at most 1,000 are returned;
//! the filesystem walk runs on a blocking thread.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolCallContext, TypedTool, paths};
use crate::blueprint::system_prompt::work_dir_listing;
use crate::protocol::ToolReturnValue;

pub const MAX_MATCHES: usize = 1000;

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobParams {
    /// Glob pattern relative to the directory, e.g. `*.py` or `src/**/*.rs`.
    pub pattern: String,
    /// Absolute path of the directory to search in; defaults to the working directory.
    #[serde(default)]
    pub directory: Option<String>,
    /// Whether directories may appear in the results (files always do).
    #[serde(default = "yes")]
    pub include_dirs: bool,
}

pub struct Glob;

impl TypedTool for Glob {
    type Params = GlobParams;
    const NAME: &'static str = "Glob";

    fn description(&self) -> String {
        include_str!("desc/glob.md").trim().replace("{max}", &MAX_MATCHES.to_string())
    }

    fn run<'a>(&'a self, params: GlobParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        let work_dir = ctx.env.work_dir.clone();
        let sandbox = ctx.env.sandbox.current();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || glob_tool(&work_dir, &params, &sandbox)).await {
                Ok(r) => r,
                Err(e) => ToolReturnValue::crashed(format!("Error running tool: {e}")),
            }
        })
    }
}

/// Entries under the sandbox's `deny_read` are skipped (spec sandbox.md §4).
fn glob_tool(work_dir: &Path, params: &GlobParams, sandbox: &crate::sandbox::Sandbox) -> ToolReturnValue {
    let pattern = params.pattern.as_str();
    if pattern.starts_with("**") {
        return ToolReturnValue::error(
            format!(
                "Pattern `{pattern}` starts with '**' which is not allowed. This would recursively search all \
                 directories and may include large directories like `node_modules`. Use more specific patterns \
                 instead. For your convenience, a list of all files and directories in the top level of the \
                 working directory is provided below."
            ),
            "Unsafe pattern",
        )
        .with_output(work_dir_listing(work_dir));
    }
    let dir = match params.directory.as_deref() {
        None | Some("") => work_dir.to_path_buf(),
        Some(d) => {
            let p = Path::new(d);
            if !p.is_absolute() {
                return ToolReturnValue::error(
                    format!("`{d}` is not an absolute path. You must provide an absolute path to search."),
                    "Invalid directory",
                );
            }
            let p = paths::normalize(p);
            if !paths::is_within(&p, work_dir) {
                return ToolReturnValue::error(
                    format!(
                        "`{d}` is outside the working directory. You can only search within the working directory."
                    ),
                    "Directory outside working directory",
                );
            }
            if !p.exists() {
                return ToolReturnValue::error(format!("`{d}` does not exist."), "Directory not found");
            }
            if !p.is_dir() {
                return ToolReturnValue::error(format!("`{d}` is not a directory."), "Invalid directory");
            }
            p
        }
    };
    let mut matches = match glob_paths(&dir, pattern) {
        Ok(m) => m,
        Err(e) => {
            return ToolReturnValue::error(
                format!("Failed to search for pattern {pattern}. Error: {e}"),
                "Glob failed",
            );
        }
    };
    if !params.include_dirs {
        matches.retain(|p| p.is_file());
    }
    matches.retain(|p| !sandbox.read_denied(p));
    let total = matches.len();
    let mut message = if total > 0 {
        format!("Found {total} matches for pattern `{pattern}`.")
    } else {
        format!("No matches found for pattern `{pattern}`.")
    };
    if total > MAX_MATCHES {
        matches.truncate(MAX_MATCHES);
        message.push_str(&format!(
            " Only the first {MAX_MATCHES} matches are returned. You may want to use a more specific pattern."
        ));
    }
    let mut output = String::new();
    for (i, m) in matches.iter().enumerate() {
        if i > 0 {
            output.push('\n');
        }
        let rel = m.strip_prefix(&dir).unwrap_or(m);
        output.push_str(&rel.to_string_lossy());
    }
    ToolReturnValue::ok(output, message)
}

#[derive(Debug)]
enum Part {
    /// One or more literal names joined with `/`.
    Literal(PathBuf),
    /// A wildcard name pattern; `None` is a bare `*` (matches every name).
    Wild(Option<GlobMatcher>),
    Recursive,
    /// From a trailing `/`: the path must be a directory.
    DirOnly,
}

/// Errors a caller reports as `Failed to search for pattern ...`.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    #[error("Unacceptable pattern: '{0}'")]
    Empty(String),
    #[error("Non-relative patterns are unsupported")]
    Absolute,
    #[error("{0}")]
    Pattern(#[from] globset::Error),
}

/// All paths below `dir` matching `pattern`, sorted component-wise, absolute.
pub fn glob_paths(dir: &Path, pattern: &str) -> Result<Vec<PathBuf>, GlobError> {
    let parts = parse_pattern(pattern)?;
    let mut out = Vec::new();
    select(dir, &parts, false, &mut out);
    out.sort();
    out.dedup();
    Ok(out)
}

fn parse_pattern(pattern: &str) -> Result<Vec<Part>, GlobError> {
    if pattern.starts_with('/') {
        return Err(GlobError::Absolute);
    }
    let raw: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if raw.is_empty() {
        return Err(GlobError::Empty(pattern.to_string()));
    }
    let mut parts: Vec<Part> = Vec::new();
    for name in raw {
        if name == "**" {
            // Consecutive `**` parts add nothing.
            if !matches!(parts.last(), Some(Part::Recursive)) {
                parts.push(Part::Recursive);
            }
        } else if name.contains(['*', '?', '[']) {
            let matcher = if name == "*" { None } else { Some(compile_name(name)?) };
            parts.push(Part::Wild(matcher));
        } else if let Some(Part::Literal(prev)) = parts.last_mut() {
            prev.push(name);
        } else {
            parts.push(Part::Literal(PathBuf::from(name)));
        }
    }
    if pattern.ends_with('/') {
        parts.push(Part::DirOnly);
    }
    Ok(parts)
}

/// Compiles one fnmatch name pattern with globset, translating the syntax differences: braces
/// are literal, `[^..]` is a set containing `^` (not a negation), a `[` without a closing `]` is
/// literal, backslash is literal.
fn compile_name(name: &str) -> Result<GlobMatcher, globset::Error> {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => {
                // Runs of stars are one star in fnmatch.
                if !out.ends_with('*') || out.ends_with("[*]") {
                    out.push('*');
                }
            }
            '?' => out.push('?'),
            '{' => out.push_str("[{]"),
            '}' => out.push_str("[}]"),
            '[' => {
                let mut j = i;
                if j < chars.len() && chars[j] == '!' {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str("[[]");
                    continue;
                }
                let stuff: String = chars[i..j].iter().collect();
                i = j + 1;
                if let Some(rest) = stuff.strip_prefix('!') {
                    out.push_str("[!");
                    out.push_str(rest);
                    out.push(']');
                } else if let Some(rest) = stuff.strip_prefix('^') {
                    // fnmatch: a leading `^` is literal; globset would negate, so move it.
                    if rest.is_empty() {
                        out.push('^');
                    } else {
                        out.push('[');
                        out.push_str(rest);
                        out.push_str("^]");
                    }
                } else {
                    out.push('[');
                    out.push_str(&stuff);
                    out.push(']');
                }
            }
            c => out.push(c),
        }
    }
    Ok(GlobBuilder::new(&out).literal_separator(true).backslash_escape(false).build()?.compile_matcher())
}

fn is_dir_following(entry: &std::fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(t) if t.is_dir() => true,
        Ok(t) if t.is_symlink() => entry.path().is_dir(),
        _ => false,
    }
}

fn select(path: &Path, parts: &[Part], exists: bool, out: &mut Vec<PathBuf>) {
    let Some((first, rest)) = parts.split_first() else {
        if exists || path.symlink_metadata().is_ok() {
            out.push(path.to_path_buf());
        }
        return;
    };
    match first {
        Part::Literal(lit) => select(&path.join(lit), rest, false, out),
        Part::DirOnly => {
            if path.is_dir() {
                select(path, rest, true, out);
            }
        }
        Part::Wild(matcher) => {
            let dir_only = !rest.is_empty();
            let Ok(entries) = std::fs::read_dir(path) else { return };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if let Some(m) = matcher
                    && !m.is_match(Path::new(&name))
                {
                    continue;
                }
                if dir_only {
                    if is_dir_following(&entry) {
                        select(&entry.path(), rest, true, out);
                    }
                } else {
                    out.push(entry.path());
                }
            }
        }
        Part::Recursive => {
            let dir_only = !rest.is_empty();
            select(path, rest, exists, out);
            let mut stack = vec![path.to_path_buf()];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for entry in entries.flatten() {
                    // `**` does not descend into symlinked directories.
                    let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                    if is_dir || !dir_only {
                        let p = entry.path();
                        if dir_only {
                            select(&p, rest, true, out);
                        } else {
                            out.push(p.clone());
                        }
                        if is_dir {
                            stack.push(p);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_translation() {
        assert!(compile_name("*.py").unwrap().is_match(".hidden.py"));
        assert!(compile_name("{a,b}").unwrap().is_match("{a,b}"));
        assert!(!compile_name("{a,b}").unwrap().is_match("a"));
        assert!(compile_name("[^x]").unwrap().is_match("^"));
        assert!(compile_name("[!x]").unwrap().is_match("y"));
        assert!(!compile_name("[!x]").unwrap().is_match("x"));
        assert!(compile_name("a[b").unwrap().is_match("a[b"));
        assert!(compile_name("a**b").unwrap().is_match("axxb"));
        assert!(compile_name("a\\b").unwrap().is_match("a\\b"));
    }

    #[test]
    fn pattern_errors() {
        assert!(matches!(parse_pattern(""), Err(GlobError::Empty(_))));
        assert!(matches!(parse_pattern("/etc/*"), Err(GlobError::Absolute)));
    }
}
