//! The `codex exec` command line (spec codex-exec.md §2, §3): what `@openai/codex-sdk` builds,
//! plus the cheap parts of codex's own `exec` flags.
//!
//! Invariants: parsing never touches the file system; every flag is served, noted (accepted,
//! harmless, one stderr line) or refused with one line — never silently dropped; a refusal of a
//! flag the SDK sends exits 1 (codex's start-up failures), a usage error exits 2.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::sandbox::SandboxMode;

/// Which session the turn continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    Id(String),
    /// `resume --last`: the work dir's last session.
    Last,
}

#[derive(Debug, Default, PartialEq)]
pub struct CodexArgs {
    /// `--experimental-json` / `--json`.
    pub json: bool,
    /// `--config k=v`, in order.
    pub configs: Vec<String>,
    pub model: Option<String>,
    /// `--sandbox`, or the bypass flag (= `danger-full-access`).
    pub sandbox: Option<SandboxMode>,
    pub cd: Option<PathBuf>,
    pub add_dirs: Vec<PathBuf>,
    pub skip_git_repo_check: bool,
    pub output_schema: Option<PathBuf>,
    pub images: Vec<PathBuf>,
    pub resume: Option<Resume>,
    /// `-o FILE`: the last agent message is written there too.
    pub last_message_file: Option<PathBuf>,
    /// A positional prompt (`-` = stdin, as without one).
    pub prompt: Option<String>,
    /// Accepted flags that change nothing in kiwi, for one stderr note each.
    pub notes: Vec<String>,
    pub help: bool,
    pub version: bool,
}

/// Why the command line cannot be served.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    /// Exit 2.
    Usage(String),
    /// Exit 1: a flag the SDK may send that kiwi cannot serve.
    Refused(String),
}

/// codex flags the SDK never sends and kiwi does not serve (exit 2).
const UNSUPPORTED: &[&str] = &[
    "--oss",
    "--local-provider",
    "-p",
    "--profile",
    "--worktree",
    "--approve-for-me",
    "--dangerously-bypass-hook-trust",
    "--ephemeral",
];

/// Accepted with a note: they tune codex's own config loading or colours, nothing kiwi has.
const NOTED_SWITCHES: &[&str] = &["--strict-config", "--ignore-user-config", "--ignore-rules"];
const NOTED_WITH_VALUE: &[&str] = &["--enable", "--disable"];

fn sandbox_mode(value: &str) -> Result<SandboxMode, ArgError> {
    match value {
        "read-only" | "workspace-write" | "danger-full-access" => Ok(SandboxMode::parse(value).unwrap_or_default()),
        other => Err(ArgError::Usage(format!(
            "invalid value '{other}' for '--sandbox <SANDBOX_MODE>' (possible values: read-only, workspace-write, danger-full-access)"
        ))),
    }
}

impl CodexArgs {
    /// Parses argv after the program name; `exec` comes first.
    pub fn parse(args: &[OsString]) -> Result<Self, ArgError> {
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let mut out = CodexArgs::default();
        let mut i = usize::from(args.first().is_some_and(|a| a == "exec"));
        let mut positional_only = false;
        while i < args.len() {
            let token = args[i].clone();
            i += 1;
            if positional_only || !token.starts_with('-') || token == "-" {
                out.positional(token)?;
                continue;
            }
            if token == "--" {
                positional_only = true;
                continue;
            }
            let (name, inline) = match token.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (token.clone(), None),
            };
            let mut value = |what: &str| -> Result<String, ArgError> {
                if let Some(v) = inline.clone() {
                    return Ok(v);
                }
                let v = args.get(i).cloned().ok_or_else(|| {
                    ArgError::Usage(format!("a value is required for '{name} <{what}>' but none was supplied"))
                })?;
                i += 1;
                Ok(v)
            };
            match name.as_str() {
                "--experimental-json" | "--json" => out.json = true,
                "-c" | "--config" => out.configs.push(value("key=value")?),
                "-m" | "--model" => out.model = Some(value("MODEL")?),
                "--thread-source" => {
                    // A label codex stores with a new thread; kiwi's sessions have none.
                    value("SOURCE")?;
                }
                "-s" | "--sandbox" => out.sandbox = Some(sandbox_mode(&value("SANDBOX_MODE")?)?),
                "--full-auto" => out.sandbox = Some(SandboxMode::WorkspaceWrite),
                "--dangerously-bypass-approvals-and-sandbox" | "--yolo" => {
                    out.sandbox = Some(SandboxMode::Off);
                    out.skip_git_repo_check = true;
                }
                "-C" | "--cd" => out.cd = Some(PathBuf::from(value("DIR")?)),
                "--add-dir" => out.add_dirs.push(PathBuf::from(value("DIR")?)),
                "--skip-git-repo-check" => out.skip_git_repo_check = true,
                "--output-schema" => out.output_schema = Some(PathBuf::from(value("FILE")?)),
                "-i" | "--image" => {
                    out.images.extend(value("FILE")?.split(',').filter(|s| !s.is_empty()).map(PathBuf::from))
                }
                "-o" | "--output-last-message" => out.last_message_file = Some(PathBuf::from(value("FILE")?)),
                "--color" => {
                    value("COLOR")?;
                }
                "--cyber-access-program" => {
                    return Err(ArgError::Refused("kiwi: --cyber-access-program is not supported".into()));
                }
                "--last" if out.prompt.as_deref() == Some("resume") => {
                    out.prompt = None;
                    out.resume = Some(Resume::Last);
                }
                "--all" => return Err(ArgError::Usage("kiwi: resume --all is not supported".into())),
                "-h" | "--help" => out.help = true,
                "-V" | "--version" => out.version = true,
                n if NOTED_SWITCHES.contains(&n) => out.notes.push(format!("{n}: kiwi reads no codex config")),
                n if NOTED_WITH_VALUE.contains(&n) => {
                    let feature = value("FEATURE")?;
                    out.notes.push(format!("{n} {feature}: kiwi has no codex feature flags"));
                }
                n if UNSUPPORTED.contains(&n) => {
                    return Err(ArgError::Usage(format!("kiwi: {n} is not supported by kiwi's codex exec")));
                }
                other => return Err(ArgError::Usage(format!("kiwi: unexpected argument '{other}' for codex exec"))),
            }
        }
        if out.prompt.as_deref() == Some("resume") {
            // `resume` with neither an id nor `--last`.
            return Err(ArgError::Usage("kiwi: resume needs a thread id or --last".into()));
        }
        Ok(out)
    }

    /// A positional word: the `resume` subcommand and its id, or the prompt.
    fn positional(&mut self, word: String) -> Result<(), ArgError> {
        if self.prompt.as_deref() == Some("resume") && self.resume.is_none() {
            self.prompt = None;
            self.resume = Some(Resume::Id(word));
            return Ok(());
        }
        if self.prompt.is_none() && self.resume.is_none() {
            if matches!(word.as_str(), "review" | "fork" | "help") {
                return Err(ArgError::Usage(format!("kiwi: codex exec {word} is not supported")));
            }
            // `resume` waits for its id (or `--last`) in the prompt's place.
            self.prompt = Some(word);
            return Ok(());
        }
        if self.prompt.is_none() {
            self.prompt = Some(word);
            return Ok(());
        }
        Err(ArgError::Usage(format!("kiwi: unexpected argument '{word}' for codex exec")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CodexArgs, ArgError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        CodexArgs::parse(&args)
    }

    #[test]
    fn the_sdk_command_lines() {
        let a = parse(&["exec", "--experimental-json", "--cd", "/p", "--skip-git-repo-check"]).unwrap();
        assert!(a.json && a.skip_git_repo_check);
        assert_eq!(a.cd, Some(PathBuf::from("/p")));
        let a = parse(&[
            "exec",
            "--experimental-json",
            "--sandbox",
            "workspace-write",
            "--cd",
            "/p",
            "--add-dir",
            "/x",
            "--skip-git-repo-check",
            "--config",
            "sandbox_workspace_write.network_access=false",
            "--config",
            "approval_policy=\"never\"",
            "resume",
            "019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607",
            "--image",
            "/p/dot.png",
        ])
        .unwrap();
        assert_eq!(a.sandbox, Some(SandboxMode::WorkspaceWrite));
        assert_eq!(a.add_dirs, vec![PathBuf::from("/x")]);
        assert_eq!(a.configs.len(), 2);
        assert_eq!(a.resume, Some(Resume::Id("019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607".into())));
        assert_eq!(a.images, vec![PathBuf::from("/p/dot.png")]);
        assert_eq!(a.prompt, None);
        let a =
            parse(&["exec", "--json", "--output-schema", "/t/s.json", "--model", "m", "--thread-source", "x"]).unwrap();
        assert_eq!((a.output_schema, a.model), (Some(PathBuf::from("/t/s.json")), Some("m".into())));
    }

    #[test]
    fn codex_spellings() {
        let a =
            parse(&["exec", "--json", "-s", "danger-full-access", "-C", "/w", "resume", "--last", "go on"]).unwrap();
        assert_eq!((a.sandbox, a.resume, a.prompt), (Some(SandboxMode::Off), Some(Resume::Last), Some("go on".into())));
        let a = parse(&["exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "hello"]).unwrap();
        assert!(a.skip_git_repo_check);
        assert_eq!(a.prompt.as_deref(), Some("hello"));
        let a = parse(&["exec", "--json", "--enable", "x", "--strict-config", "--color=never"]).unwrap();
        assert_eq!(a.notes.len(), 2);
        assert!(!parse(&["exec"]).unwrap().json);
    }

    #[test]
    fn bad_and_refused_lines() {
        assert_eq!(
            parse(&["exec", "--json", "--cyber-access-program", "p"]),
            Err(ArgError::Refused("kiwi: --cyber-access-program is not supported".into()))
        );
        assert!(
            matches!(parse(&["exec", "--json", "--sandbox", "bogus"]), Err(ArgError::Usage(m)) if m.contains("bogus"))
        );
        assert!(matches!(parse(&["exec", "--json", "--oss"]), Err(ArgError::Usage(m)) if m.contains("--oss")));
        assert!(matches!(parse(&["exec", "--json", "--nope"]), Err(ArgError::Usage(m)) if m.contains("--nope")));
        assert!(matches!(parse(&["exec", "--json", "--model"]), Err(ArgError::Usage(m)) if m.contains("--model")));
        assert!(matches!(parse(&["exec", "--json", "resume"]), Err(ArgError::Usage(m)) if m.contains("thread id")));
        assert!(matches!(parse(&["exec", "--json", "review"]), Err(ArgError::Usage(_))));
        assert!(matches!(parse(&["exec", "--json", "a", "b"]), Err(ArgError::Usage(_))));
    }
}
