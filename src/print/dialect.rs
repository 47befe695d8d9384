//! Which command line this is: kimi's (wire mode or `--print`), Claude Code's headless one
//! (`docs/print-mode.md` C.4) or codex's `exec` (`docs/codex-exec.md`, first argument `exec`). The two reuse spellings with different meanings (`-p`, `-c`, a
//! positional argument), so the choice is made on the raw argv before either parser runs.
//!
//! Invariants: the scan never fails (the chosen parser reports usage errors); option values are
//! skipped, in both `--flag value` and `--flag=value` form, so a value (`--system-prompt ""`)
//! never sways the choice, and an option is never taken for a value.

use std::ffi::OsString;

/// The command-line dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// kimi's flags: wire mode (the default) or `--print`.
    Kimi,
    /// Claude Code's headless flags (`-p`, `--output-format stream-json`, ...).
    Claude,
    /// `codex exec ...` (no kimi or Claude command line starts with the word `exec`).
    Codex,
}

/// The environment variable that forces a dialect (`claude` or `kimi`).
pub const DIALECT_ENV: &str = "KIMI_DIALECT";

/// Options only Claude Code has (C.4 rule 3); `--output-format json` is checked separately.
const CLAUDE_ONLY: &[&str] = &[
    "--include-partial-messages",
    "--replay-user-messages",
    "--permission-prompt-tool",
    "--permission-mode",
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--max-turns",
    "--system-prompt",
    "--system-prompt-file",
    "--append-system-prompt",
    "--dangerously-skip-permissions",
    "--session-id",
    "--tools",
    "--settings",
    "--setting-sources",
    "--strict-mcp-config",
    "--json-schema",
    "--max-budget-usd",
    "--fallback-model",
];

/// Options that mark a kimi command line (C.4 rule 5).
const KIMI_ONLY: &[&str] = &[
    "--print",
    "--final-message-only",
    "--quiet",
    "--wire",
    "--acp",
    "-m",
    "-y",
    "-S",
    "-w",
    "-C",
    "-V",
    "--yolo",
    "--yes",
    "--auto-approve",
    "--session",
    "--prompt",
    "--command",
    "--afk",
    "--max-tokens-per-session",
    "--stream-deltas",
];

/// kimi's print-mode options: with one of them (or `--wire` / `--acp`), `-r` / `--resume` is
/// kimi's spelling of `--session`; without, Claude Code's `--resume`.
const KIMI_PRINT: &[&str] = &["--print", "--quiet", "--final-message-only", "--stream-deltas"];

/// Options of either dialect that take a value; their value is skipped by the scan. `-p` and
/// `-c` are handled apart (a value in kimi, a switch in Claude).
const TAKES_VALUE: &[&str] = &[
    "--output-format",
    "--input-format",
    "--permission-prompt-tool",
    "--permission-mode",
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
    "--max-turns",
    "--system-prompt",
    "--system-prompt-file",
    "--append-system-prompt",
    "--resume",
    "-r",
    "--session-id",
    "--tools",
    "--settings",
    "--setting-sources",
    "--json-schema",
    "--max-budget-usd",
    "--fallback-model",
    "--model",
    "-m",
    "--mcp-config",
    "--mcp-config-file",
    "--add-dir",
    "--config",
    "--config-file",
    "--work-dir",
    "-w",
    "--session",
    "-S",
    "--agent",
    "--agent-file",
    "--skills-dir",
    "--max-steps-per-turn",
    "--max-retries-per-step",
    "--max-ralph-iterations",
    "--max-line-bytes",
    "--max-tokens-per-session",
    "--prompt",
    "--command",
    "--betas",
    "--task-budget",
    "--plugin-dir",
    "--thinking",
    "--max-thinking-tokens",
    "--thinking-display",
    "--effort",
    "--resume-session-at",
    "--resume-drops-turn",
    "--debug-file",
    // kiwi's own (spec sandbox.md §2.1), accepted in both dialects.
    "--sandbox",
    "--agents",
];

/// What the scan saw.
#[derive(Debug, Default)]
struct Scan {
    stream_json_io: bool,
    print_like: bool,
    wire_or_acp: bool,
    claude_only: bool,
    kimi_only: bool,
    positional: bool,
    /// `-p`/`-c` used as a switch (followed by an option or nothing).
    p_switch: bool,
    /// `-p TEXT` / `-c TEXT`: kimi's prompt or Claude's switch plus a prompt.
    p_with_text: bool,
    /// The first positional word is one of kiwi's subcommands.
    kiwi_subcommand: bool,
    /// `-r` / `--resume`: kimi's or Claude's, by the company it keeps.
    resume: bool,
    /// One of kimi's print-mode options.
    kimi_print: bool,
}

fn scan(args: &[OsString]) -> Scan {
    let mut s = Scan::default();
    let mut i = 0;
    while i < args.len() {
        let token = args[i].to_string_lossy();
        i += 1;
        if token == "--" {
            s.positional |= i < args.len();
            break;
        }
        if !token.starts_with('-') || token == "-" {
            // The first positional word naming a kiwi subcommand makes it a kiwi command line.
            if !s.positional && is_kiwi_subcommand(&token) {
                s.kiwi_subcommand = true;
            }
            s.positional = true;
            continue;
        }
        let (name, inline_value) = match token.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (token.to_string(), None),
        };
        if name == "-p" || name == "-c" {
            let next_is_text = args.get(i).map(|a| !a.to_string_lossy().starts_with('-')).unwrap_or(false);
            if next_is_text {
                s.p_with_text = true;
                i += 1;
            } else {
                s.p_switch = true;
            }
            s.print_like |= name == "-p";
            continue;
        }
        // A value never starts with a dash (as Claude's parser has it; dash-leading values come
        // as `--flag=value`), so kimi's switch `--thinking` does not swallow the next option.
        let value = if TAKES_VALUE.contains(&name.as_str()) {
            match inline_value {
                Some(v) => Some(v),
                None => match args.get(i).map(|a| a.to_string_lossy().to_string()) {
                    Some(next) if !next.starts_with('-') || next == "-" => {
                        i += 1;
                        Some(next)
                    }
                    _ => None,
                },
            }
        } else {
            None
        };
        if (name == "--output-format" || name == "--input-format") && value.as_deref() == Some("stream-json") {
            s.stream_json_io = true;
        }
        if name == "--output-format" && value.as_deref() == Some("json") {
            s.claude_only = true;
        }
        if matches!(name.as_str(), "--print" | "--quiet" | "--wire" | "--acp") {
            s.print_like = true;
        }
        s.wire_or_acp |= matches!(name.as_str(), "--wire" | "--acp");
        s.resume |= matches!(name.as_str(), "-r" | "--resume");
        s.kimi_print |= KIMI_PRINT.contains(&name.as_str());
        s.claude_only |= CLAUDE_ONLY.contains(&name.as_str());
        s.kimi_only |= KIMI_ONLY.contains(&name.as_str());
    }
    s
}

/// Chooses the dialect of `args` (argv without the program name). `program` is argv\[0\],
/// `forced` the value of [`DIALECT_ENV`], `stdout_is_tty` breaks the one remaining tie.
pub fn choose(program: &str, args: &[OsString], forced: Option<&str>, stdout_is_tty: bool) -> Dialect {
    match forced.map(str::trim) {
        Some("claude") => return Dialect::Claude,
        Some("kimi") => return Dialect::Kimi,
        Some(other) if !other.is_empty() => tracing::warn!("ignoring {DIALECT_ENV}={other:?}: not claude or kimi"),
        _ => {}
    }
    let invoked_as = std::path::Path::new(program).file_name().map(|n| n.to_string_lossy().to_string());
    if invoked_as.as_deref() == Some("claude") {
        return Dialect::Claude;
    }
    if args.first().is_some_and(|a| a == "exec") {
        return Dialect::Codex;
    }
    let s = scan(args);
    // A kiwi subcommand (`kiwi login`, `kiwi --config-file c info`) is never a Claude prompt.
    if s.kiwi_subcommand {
        return Dialect::Kimi;
    }
    // Claude Code has no wire or ACP mode: these settle it.
    if s.wire_or_acp {
        return Dialect::Kimi;
    }
    if s.stream_json_io && !s.print_like {
        return Dialect::Claude;
    }
    // `-r ID` with kimi's print options is kimi's `--session`; alone it is Claude's `--resume`.
    if s.resume && !s.kimi_print {
        return Dialect::Claude;
    }
    if s.claude_only || s.positional || s.p_switch {
        return Dialect::Claude;
    }
    if s.kimi_only {
        return Dialect::Kimi;
    }
    if s.p_with_text && !stdout_is_tty {
        return Dialect::Claude;
    }
    Dialect::Kimi
}

fn is_kiwi_subcommand(word: &str) -> bool {
    crate::cli::subcommand_names().iter().any(|n| n == word)
}

/// Whether the program's name (`claude`) or [`DIALECT_ENV`] settles Claude's dialect, whatever
/// the arguments say.
pub fn claude_by_name_or_env(argv: &[OsString]) -> bool {
    let program = argv.first().map(|p| p.to_string_lossy().to_string()).unwrap_or_default();
    let forced = std::env::var(DIALECT_ENV).ok();
    choose(&program, &[], forced.as_deref(), false) == Dialect::Claude
}

/// The dialect of this process's command line (`argv` with the program name first).
pub fn from_process(argv: &[OsString]) -> Dialect {
    use std::io::IsTerminal;
    let program = argv.first().map(|p| p.to_string_lossy().to_string()).unwrap_or_default();
    let forced = std::env::var(DIALECT_ENV).ok();
    choose(&program, argv.get(1..).unwrap_or(&[]), forced.as_deref(), std::io::stdout().is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(args: &[&str]) -> Dialect {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        choose("kiwi", &args, None, false)
    }

    #[test]
    fn the_sdk_launch_is_claude() {
        assert_eq!(
            pick(&[
                "--output-format",
                "stream-json",
                "--verbose",
                "--system-prompt",
                "",
                "--resume=abc",
                "--setting-sources=user,project",
                "--input-format",
                "stream-json",
            ]),
            Dialect::Claude
        );
        assert_eq!(pick(&["--output-format=stream-json", "--input-format=stream-json"]), Dialect::Claude);
    }

    #[test]
    fn kimi_command_lines_stay_kimi() {
        assert_eq!(pick(&[]), Dialect::Kimi);
        assert_eq!(pick(&["--wire"]), Dialect::Kimi);
        assert_eq!(pick(&["--print", "--output-format", "stream-json", "-p", "hi"]), Dialect::Kimi);
        assert_eq!(pick(&["--quiet", "-c", "hi"]), Dialect::Kimi);
        assert_eq!(pick(&["login", "--json"]), Dialect::Kimi);
        assert_eq!(pick(&["info"]), Dialect::Kimi);
        assert_eq!(pick(&["--config-file", "c.toml", "info", "--json"]), Dialect::Kimi);
        assert_eq!(pick(&["-p", "info"]), Dialect::Claude);
        assert_eq!(pick(&["--print", "--input-format", "stream-json"]), Dialect::Kimi);
        assert_eq!(pick(&["-y", "-m", "k2", "--work-dir", "/w"]), Dialect::Kimi);
        // A kimi usage error is still kimi's to report.
        assert_eq!(pick(&["--output-format", "text"]), Dialect::Kimi);
        assert_eq!(pick(&["--sandbox", "bogus"]), Dialect::Kimi);
        assert_eq!(pick(&["--sandbox", "read-only", "--sandbox-network", "--wire"]), Dialect::Kimi);
    }

    #[test]
    fn claude_markers() {
        assert_eq!(pick(&["-p", "--verbose", "--output-format", "stream-json"]), Dialect::Claude);
        assert_eq!(pick(&["-p"]), Dialect::Claude);
        assert_eq!(pick(&["hello there"]), Dialect::Claude);
        assert_eq!(pick(&["--output-format", "json", "-p", "x"]), Dialect::Claude);
        assert_eq!(pick(&["--max-turns", "3", "-p", "x"]), Dialect::Claude);
        assert_eq!(pick(&["--dangerously-skip-permissions"]), Dialect::Claude);
        // A value is skipped; an option is never taken for a value.
        assert_eq!(pick(&["--print", "--config", "{\"a\": 1}", "-p", "x"]), Dialect::Kimi);
        assert_eq!(pick(&["--print", "--config", "--max-turns", "3"]), Dialect::Claude);
        assert_eq!(pick(&["--config-file", "c.toml", "--thinking", "--work-dir", "/w"]), Dialect::Kimi);
        assert_eq!(pick(&["--wire", "--thinking", "--work-dir", "/w", "stray"]), Dialect::Kimi);
    }

    #[test]
    fn resume_follows_the_company_it_keeps() {
        // kimi 1.49's `-r` / `--resume` beside wire, ACP or kimi's print options.
        assert_eq!(pick(&["--wire", "-r", "s1"]), Dialect::Kimi);
        assert_eq!(pick(&["--acp", "--resume", "s1"]), Dialect::Kimi);
        assert_eq!(pick(&["--print", "-r", "s1", "-p", "hi"]), Dialect::Kimi);
        assert_eq!(pick(&["--quiet", "--resume=s1", "-c", "hi"]), Dialect::Kimi);
        assert_eq!(pick(&["--print", "--output-format", "stream-json", "--resume", "s1"]), Dialect::Kimi);
        // Otherwise Claude Code's.
        assert_eq!(pick(&["-r", "s1"]), Dialect::Claude);
        assert_eq!(pick(&["--resume", "s1", "-p", "hi"]), Dialect::Claude);
        assert_eq!(pick(&["-y", "--resume", "s1"]), Dialect::Claude);
        assert_eq!(
            pick(&["--output-format", "stream-json", "--resume=abc", "--input-format", "stream-json"]),
            Dialect::Claude
        );
        // The other kimi 1.49 flags mark a kimi line.
        assert_eq!(pick(&["--afk"]), Dialect::Kimi);
        assert_eq!(pick(&["--max-tokens-per-session", "100"]), Dialect::Kimi);
    }

    #[test]
    fn exec_first_is_codex() {
        assert_eq!(pick(&["exec", "--experimental-json", "--cd", "/p", "--skip-git-repo-check"]), Dialect::Codex);
        assert_eq!(pick(&["exec"]), Dialect::Codex);
        // Elsewhere `exec` is a Claude prompt, as before.
        assert_eq!(pick(&["-p", "exec"]), Dialect::Claude);
    }

    #[test]
    fn the_tie_follows_stdout() {
        let args: Vec<OsString> = ["-p", "hi"].iter().map(OsString::from).collect();
        assert_eq!(choose("kiwi", &args, None, true), Dialect::Kimi);
        assert_eq!(choose("kiwi", &args, None, false), Dialect::Claude);
    }

    #[test]
    fn explicit_choices_win() {
        let args: Vec<OsString> = ["--print"].iter().map(OsString::from).collect();
        assert_eq!(choose("kiwi", &args, Some("claude"), true), Dialect::Claude);
        assert_eq!(choose("/usr/bin/claude", &args, None, true), Dialect::Claude);
        let sdk: Vec<OsString> = ["--output-format", "stream-json"].iter().map(OsString::from).collect();
        assert_eq!(choose("kiwi", &sdk, Some("kimi"), true), Dialect::Kimi);
    }
}
