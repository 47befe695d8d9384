//! `Grep`: ripgrep, in process (`docs/tools.md` §9).
//!
//! The reference shells out to `rg`; this runs ripgrep's own crates (`ignore`, `grep-regex`,
//! `grep-searcher`, `grep-printer`) with the settings `rg` uses by default when its output is not
//! a terminal, so results look like `rg`'s: `path:line` for matches, `path-line` for context,
//! `--` between context groups, `path:N` counts, bare paths for files-with-matches, and no path
//! prefix when a single file is searched.
//!
//! Invariants:
//! * paths are resolved against the work dir but displayed as the user wrote them (`./a.txt`
//!   for the default path `.`, absolute paths stay absolute);
//! * ripgrep's ignore rules apply: hidden files, `.gitignore` (inside git repos), `.ignore`,
//!   `.rgignore`; walked files containing NUL are skipped as binary;
//! * "exit code" semantics are kept: any error (bad regex, unknown type, unreadable file) makes
//!   the output the error text, returned as a *successful* result, as the reference does;
//! * output is deterministic: per-file results are sorted by path (rg's own order depends on
//!   thread scheduling), and collection stops after [`MAX_COLLECTED_BYTES`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use grep_printer::{StandardBuilder, SummaryBuilder, SummaryKind};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};
use schemars::JsonSchema;
use serde::Deserialize;

use super::output::OutputBuilder;
use super::{ToolCallContext, TypedTool, paths};
use crate::protocol::ToolReturnValue;

/// Output kept in memory before the walk is stopped; far beyond what the 50,000-character result
/// can show, but it bounds memory for patterns that match everything in a huge tree.
pub const MAX_COLLECTED_BYTES: usize = 64 << 20;

fn dot() -> String {
    ".".to_string()
}

fn files_with_matches() -> String {
    "files_with_matches".to_string()
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GrepParams {
    /// Regular expression to search for (ripgrep / Rust regex syntax).
    pub pattern: String,
    /// File or directory to search; absolute paths are recommended, relative ones are taken from
    /// the working directory.
    #[serde(default = "dot")]
    pub path: String,
    /// Only search files whose path matches this glob, e.g. `*.rs` or `*.{ts,tsx}`.
    #[serde(default)]
    pub glob: Option<String>,
    /// `content` (matching lines), `files_with_matches` (paths only) or `count_matches` (matches
    /// per file).
    #[serde(default = "files_with_matches")]
    pub output_mode: String,
    /// Lines of context before each match (content mode only).
    #[serde(rename = "-B", default)]
    pub before_context: Option<i64>,
    /// Lines of context after each match (content mode only).
    #[serde(rename = "-A", default)]
    pub after_context: Option<i64>,
    /// Lines of context before and after each match (content mode only).
    #[serde(rename = "-C", default)]
    pub context: Option<i64>,
    /// Prefix matching lines with their line numbers (content mode only).
    #[serde(rename = "-n", default)]
    pub line_number: bool,
    /// Match case-insensitively.
    #[serde(rename = "-i", default)]
    pub ignore_case: bool,
    /// Only search files of this ripgrep type, e.g. `py`, `rust`, `js`.
    #[serde(rename = "type", default)]
    pub file_type: Option<String>,
    /// Keep only the first N lines of the output.
    #[serde(default)]
    pub head_limit: Option<i64>,
    /// Let the pattern span lines (`.` also matches newlines).
    #[serde(default)]
    pub multiline: bool,
}

pub struct Grep;

impl TypedTool for Grep {
    type Params = GrepParams;
    const NAME: &'static str = "Grep";

    fn description(&self) -> String {
        include_str!("desc/grep.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: GrepParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        let work_dir = ctx.env.work_dir.clone();
        let sandbox = ctx.env.sandbox.current();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || grep_tool(&work_dir, &params, sandbox)).await {
                Ok(r) => r,
                Err(e) => ToolReturnValue::error(format!("Failed to grep. Error: {e}"), "Failed to grep"),
            }
        })
    }
}

fn grep_tool(
    work_dir: &Path,
    params: &GrepParams,
    sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
) -> ToolReturnValue {
    let result = search_skipping(work_dir, params, sandbox);
    let mut output = if result.errors.is_empty() && result.matched {
        String::from_utf8_lossy(&result.stdout).into_owned()
    } else {
        result.errors
    };
    let mut message = String::new();
    if let Some(limit) = params.head_limit {
        let lines: Vec<&str> = output.split('\n').collect();
        if lines.len() as i64 > limit {
            // Python slicing: a negative limit drops that many lines from the end.
            let keep =
                if limit < 0 { lines.len().saturating_sub(limit.unsigned_abs() as usize) } else { limit as usize };
            let kept = lines[..keep].join("\n");
            output = format!("{kept}\n... (results truncated to {limit} lines)");
            message = format!("Results truncated to first {limit} lines");
        }
    }
    if output.is_empty() {
        return OutputBuilder::new().ok("No matches found");
    }
    let mut builder = OutputBuilder::new();
    builder.write(&output);
    builder.ok(message)
}

/// What one ripgrep run produced: stdout, the stderr text, and whether anything matched.
#[derive(Debug, Default)]
pub struct SearchResult {
    pub stdout: Vec<u8>,
    pub errors: String,
    pub matched: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content,
    Files,
    Count,
}

/// Runs the search like `rg` would with the equivalent flags.
pub fn search(work_dir: &Path, params: &GrepParams) -> SearchResult {
    search_skipping(work_dir, params, std::sync::Arc::new(crate::sandbox::Sandbox::off()))
}

/// [`search`] without the entries the sandbox's `deny_read` covers (spec sandbox.md §4).
pub fn search_skipping(
    work_dir: &Path,
    params: &GrepParams,
    sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
) -> SearchResult {
    let mode = match params.output_mode.as_str() {
        "files_with_matches" => Mode::Files,
        "count_matches" => Mode::Count,
        _ => Mode::Content,
    };
    let fail = |text: String| SearchResult { errors: format!("{text}\n"), ..Default::default() };

    let mut mb = RegexMatcherBuilder::new();
    mb.case_insensitive(params.ignore_case).multi_line(true).unicode(true).octal(false);
    if params.multiline {
        mb.dot_matches_new_line(true);
    } else {
        mb.line_terminator(Some(b'\n')).dot_matches_new_line(false);
    }
    let matcher = match mb.build(&params.pattern) {
        Ok(m) => m,
        Err(e) => return fail(e.to_string()),
    };

    let display_root = paths::expand_home(&params.path);
    let abs_root = if display_root.is_absolute() { display_root.clone() } else { work_dir.join(&display_root) };

    let mut walk = WalkBuilder::new(&abs_root);
    walk.current_dir(work_dir).add_custom_ignore_filename(".rgignore");
    if sandbox.is_on() && !sandbox.settings().deny_read.is_empty() {
        walk.filter_entry(move |entry| !sandbox.read_denied(entry.path()));
    }
    if let Some(glob) = params.glob.as_deref().filter(|g| !g.is_empty()) {
        let mut ob = OverrideBuilder::new(work_dir);
        if let Err(e) = ob.add(glob) {
            return fail(e.to_string());
        }
        match ob.build() {
            Ok(o) => {
                walk.overrides(o);
            }
            Err(e) => return fail(e.to_string()),
        }
    }
    if let Some(t) = params.file_type.as_deref().filter(|t| !t.is_empty()) {
        let mut tb = TypesBuilder::new();
        tb.add_defaults();
        tb.select(t);
        match tb.build() {
            Ok(types) => {
                walk.types(types);
            }
            Err(e) => return fail(e.to_string()),
        }
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(12);
    walk.threads(threads);

    let content = mode == Mode::Content;
    let (before, after) = if params.output_mode == "content" {
        // The schema allows any integer (as the reference's does); ripgrep rejects negatives.
        for (flag, value) in [
            ("--before-context", params.before_context),
            ("--after-context", params.after_context),
            ("--context", params.context),
        ] {
            if let Some(n) = value.filter(|n| *n < 0) {
                return fail(format!("error: invalid value '{n}' for '{flag} <NUM>': invalid digit found in string"));
            }
        }
        let both = params.context;
        (params.before_context.or(both).unwrap_or(0) as usize, params.after_context.or(both).unwrap_or(0) as usize)
    } else {
        (0, 0)
    };
    let line_number = params.output_mode == "content" && params.line_number;
    let with_filename = abs_root.is_dir();
    let job = Job {
        matcher,
        mode,
        multiline: params.multiline,
        before,
        after,
        line_number,
        with_filename,
        abs_root: abs_root.clone(),
        display_root,
    };

    let results: Mutex<Vec<(PathBuf, Vec<u8>)>> = Mutex::default();
    let errors: Mutex<Vec<String>> = Mutex::default();
    let matched = AtomicBool::new(false);
    let collected = AtomicUsize::new(0);
    let job = Arc::new(job);
    walk.build_parallel().run(|| {
        let job = Arc::clone(&job);
        let (results, errors, matched, collected) = (&results, &errors, &matched, &collected);
        let mut searcher = job.searcher();
        Box::new(move |entry| {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => {
                    push(errors, format!("rg: {}", job.redisplay(&err.to_string())));
                    return WalkState::Continue;
                }
            };
            let is_file =
                entry.file_type().is_some_and(|t| t.is_file()) || (entry.depth() == 0 && entry.path().is_file());
            if !is_file {
                return WalkState::Continue;
            }
            let explicit = entry.depth() == 0;
            searcher.set_binary_detection(if explicit {
                BinaryDetection::convert(b'\x00')
            } else {
                BinaryDetection::quit(b'\x00')
            });
            let shown = job.display_path(entry.path(), explicit);
            match job.search_file(&mut searcher, entry.path(), &shown) {
                Ok((out, hit)) => {
                    if hit {
                        matched.store(true, Ordering::Relaxed);
                    }
                    if !out.is_empty() {
                        let total = collected.fetch_add(out.len(), Ordering::Relaxed) + out.len();
                        if let Ok(mut r) = results.lock() {
                            r.push((shown, out));
                        }
                        if total > MAX_COLLECTED_BYTES {
                            return WalkState::Quit;
                        }
                    }
                }
                Err(err) => push(errors, format!("rg: {}: {err}", shown.display())),
            }
            WalkState::Continue
        })
    });

    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let separate = content && (before > 0 || after > 0);
    let mut stdout = Vec::new();
    for (i, (_, out)) in results.into_iter().enumerate() {
        if separate && i > 0 {
            stdout.extend_from_slice(b"--\n");
        }
        stdout.extend_from_slice(&out);
    }
    let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    errors.sort();
    let errors = errors.iter().map(|e| format!("{e}\n")).collect::<String>();
    SearchResult { stdout, errors, matched: matched.load(Ordering::Relaxed) }
}

fn push(errors: &Mutex<Vec<String>>, text: String) {
    if let Ok(mut e) = errors.lock() {
        e.push(text);
    }
}

struct Job {
    matcher: RegexMatcher,
    mode: Mode,
    multiline: bool,
    before: usize,
    after: usize,
    line_number: bool,
    with_filename: bool,
    abs_root: PathBuf,
    display_root: PathBuf,
}

impl Job {
    fn searcher(&self) -> Searcher {
        let mut sb = SearcherBuilder::new();
        sb.line_number(self.line_number).multi_line(self.multiline).bom_sniffing(true);
        if self.mode == Mode::Content {
            sb.before_context(self.before).after_context(self.after);
        }
        sb.build()
    }

    /// The path as `rg` would print it: the user's path joined with the walked remainder.
    fn display_path(&self, path: &Path, explicit: bool) -> PathBuf {
        if explicit {
            return self.display_root.clone();
        }
        match path.strip_prefix(&self.abs_root) {
            Ok(rest) => self.display_root.join(rest),
            Err(_) => path.to_path_buf(),
        }
    }

    /// Walk errors name absolute paths; show them relative to the user's path like `rg` does.
    fn redisplay(&self, text: &str) -> String {
        let abs = self.abs_root.to_string_lossy();
        match text.strip_prefix(abs.as_ref()) {
            Some(rest) => format!("{}{rest}", self.display_root.display()),
            None => text.to_string(),
        }
    }

    /// Searches one file; returns the printed bytes and whether it matched.
    fn search_file(&self, searcher: &mut Searcher, path: &Path, shown: &Path) -> std::io::Result<(Vec<u8>, bool)> {
        match self.mode {
            Mode::Content => {
                let mut printer = StandardBuilder::new()
                    .path(self.with_filename)
                    .heading(false)
                    .separator_context(Some(b"--".to_vec()))
                    .separator_search(None)
                    .build_no_color(Vec::new());
                let hit = {
                    let mut sink = printer.sink_with_path(&self.matcher, shown);
                    searcher.search_path(&self.matcher, path, &mut sink)?;
                    sink.has_match()
                };
                Ok((printer.into_inner().into_inner(), hit))
            }
            Mode::Files | Mode::Count => {
                let kind =
                    if self.mode == Mode::Files { SummaryKind::PathWithMatch } else { SummaryKind::CountMatches };
                let mut printer = SummaryBuilder::new()
                    .kind(kind)
                    .path(self.with_filename || self.mode == Mode::Files)
                    .exclude_zero(true)
                    .build_no_color(Vec::new());
                let hit = {
                    let mut sink = printer.sink_with_path(&self.matcher, shown);
                    searcher.search_path(&self.matcher, path, &mut sink)?;
                    sink.has_match()
                };
                Ok((printer.into_inner().into_inner(), hit))
            }
        }
    }
}
