//! System prompt assembly: the spec's template rendered once at start-up.
//!
//! Template syntax (as Python's `string.Template`, which agent files written for the reference
//! rely on): `${NAME}` and `$NAME` are replaced (`NAME` = `[A-Za-z_][A-Za-z0-9_]*`), `$$` is a
//! literal `$`, and any other `$` is kept literally. A placeholder with no value is an error
//! `Missing system prompt arg in <path>: <NAME>`.
//!
//! Variables: the built-ins `KIMI_NOW`, `KIMI_WORK_DIR`, `KIMI_WORK_DIR_LS`, `KIMI_AGENTS_MD`,
//! `KIMI_SKILLS`, overridden by the spec's `system_prompt_args` (e.g. `ROLE_ADDITIONAL`).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::skills::{Skill, render_skills_list};
use super::spec::{ResolvedAgentSpec, SpecPath};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SystemPromptError {
    #[error("Missing system prompt arg in {path}: {name}")]
    MissingArg { path: String, name: String },
    #[error("Failed to read system prompt {path}: {error}")]
    Read { path: String, error: String },
}

/// The start-up values of the built-in placeholders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinArgs {
    pub now: String,
    pub work_dir: String,
    pub work_dir_ls: String,
    pub agents_md: String,
    pub skills: String,
}

impl BuiltinArgs {
    /// Collects the values from the (canonical) work dir and the discovered skills.
    pub fn collect(work_dir: &Path, skills: &[Skill]) -> BuiltinArgs {
        BuiltinArgs {
            now: local_now_iso(),
            work_dir: work_dir.display().to_string(),
            work_dir_ls: work_dir_listing(work_dir),
            agents_md: read_agents_md(work_dir),
            skills: render_skills_list(skills),
        }
    }

    fn into_vars(self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("KIMI_NOW".to_string(), self.now),
            ("KIMI_WORK_DIR".to_string(), self.work_dir),
            ("KIMI_WORK_DIR_LS".to_string(), self.work_dir_ls),
            ("KIMI_AGENTS_MD".to_string(), self.agents_md),
            ("KIMI_SKILLS".to_string(), self.skills),
        ])
    }
}

/// Local date-time, ISO-8601 with microseconds and UTC offset (`2025-01-31T09:05:00.123456+01:00`).
pub fn local_now_iso() -> String {
    chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%.6f%:z").to_string()
}

/// Trimmed `<work>/AGENTS.md`, else `<work>/agents.md`, else empty.
pub fn read_agents_md(work_dir: &Path) -> String {
    ["AGENTS.md", "agents.md"]
        .iter()
        .find_map(|name| fs::read_to_string(work_dir.join(name)).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// One line per top-level entry of `dir`, in directory order: mode string (`d`/`-` + rwx bits
/// for user, group, other), a space, the size right-aligned to width 10, a space, the name.
/// Entries are stat'ed through symlinks; one that cannot be stat'ed is listed as
/// `?---------          ? <name> [stat failed]`. An unreadable `dir` gives an empty string.
pub fn work_dir_listing(dir: &Path) -> String {
    let Ok(entries) = fs::read_dir(dir) else { return String::new() };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        match fs::metadata(entry.path()) {
            Ok(meta) => {
                lines.push(format!("{} {:>10} {}", mode_string(&meta), meta.len(), name));
            }
            Err(_) => lines.push(format!("?--------- {:>10} {name} [stat failed]", "?")),
        }
    }
    lines.join("\n")
}

fn mode_string(meta: &fs::Metadata) -> String {
    let mut s = String::with_capacity(10);
    s.push(if meta.is_dir() { 'd' } else { '-' });
    #[cfg(unix)]
    let bits = {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode()
    };
    // Without Unix permission bits, approximate: readable by all, writable unless read-only.
    #[cfg(not(unix))]
    let bits: u32 = if meta.permissions().readonly() { 0o444 } else { 0o666 };
    for shift in [6u32, 3, 0] {
        let b = (bits >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// Renders `template` (see the module docs); `path` only labels errors.
pub fn render_template(
    template: &str,
    vars: &BTreeMap<String, String>,
    path: &str,
) -> Result<String, SystemPromptError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let ident_len = |s: &str| {
            let mut chars = s.char_indices();
            match chars.next() {
                Some((_, c)) if c.is_ascii_alphabetic() || c == '_' => {
                    chars.find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_')).map_or(s.len(), |(i, _)| i)
                }
                _ => 0,
            }
        };
        let (name, consumed) = if let Some(inner) = after.strip_prefix('{') {
            let n = ident_len(inner);
            if n > 0 && inner[n..].starts_with('}') { (Some(&inner[..n]), n + 2) } else { (None, 0) }
        } else {
            let n = ident_len(after);
            if n > 0 { (Some(&after[..n]), n) } else { (None, 0) }
        };
        match name {
            Some(name) => {
                let value = vars
                    .get(name)
                    .ok_or_else(|| SystemPromptError::MissingArg { path: path.to_string(), name: name.to_string() })?;
                out.push_str(value);
                rest = &after[consumed..];
            }
            None if after.starts_with('$') => {
                out.push('$');
                rest = &after[1..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads, trims and renders the spec's system prompt with the built-ins and the spec's args.
pub fn load_system_prompt(spec: &ResolvedAgentSpec, builtins: BuiltinArgs) -> Result<String, SystemPromptError> {
    render_system_prompt(&spec.system_prompt_path, &spec.system_prompt_args, builtins)
}

/// As [`load_system_prompt`], for an explicit prompt location and argument set.
pub fn render_system_prompt(
    path: &SpecPath,
    args: &BTreeMap<String, String>,
    builtins: BuiltinArgs,
) -> Result<String, SystemPromptError> {
    let shown = path.to_string();
    let text =
        path.read_to_string().map_err(|e| SystemPromptError::Read { path: shown.clone(), error: e.to_string() })?;
    let mut vars = builtins.into_vars();
    vars.extend(args.iter().map(|(k, v)| (k.clone(), v.clone())));
    render_template(text.trim(), &vars, &shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blueprint::skills::SkillKind;
    use std::path::PathBuf;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn builtins() -> BuiltinArgs {
        BuiltinArgs {
            now: "NOW".into(),
            work_dir: "/w".into(),
            work_dir_ls: "LS".into(),
            agents_md: "AG".into(),
            skills: "SK".into(),
        }
    }

    #[test]
    fn template_placeholders() {
        let v = vars(&[("A", "1"), ("B_2", "two")]);
        assert_eq!(render_template("${A}-$A-${B_2}x-$B_2.", &v, "p").unwrap(), "1-1-twox-two.");
        assert_eq!(
            render_template("cost: $$5, $ alone, $5, ${ A}, end$", &v, "p").unwrap(),
            "cost: $5, $ alone, $5, ${ A}, end$"
        );
        assert_eq!(render_template("$${A}", &v, "p").unwrap(), "${A}");
        assert_eq!(render_template("é ${A} ü", &v, "p").unwrap(), "é 1 ü");
    }

    #[test]
    fn missing_arg_error() {
        let err = render_template("hi ${NOPE}", &vars(&[]), "/x/system.md").unwrap_err();
        assert_eq!(err.to_string(), "Missing system prompt arg in /x/system.md: NOPE");
        let err = render_template("hi $Other!", &vars(&[]), "p").unwrap_err();
        assert_eq!(err.to_string(), "Missing system prompt arg in p: Other");
    }

    #[test]
    fn spec_args_override_builtins_and_text_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.md");
        fs::write(
            &p,
            "\n  ${KIMI_NOW}|${KIMI_WORK_DIR}|${KIMI_WORK_DIR_LS}|${KIMI_AGENTS_MD}|${KIMI_SKILLS}|${ROLE}  \n",
        )
        .unwrap();
        let out =
            render_system_prompt(&SpecPath::File(p.clone()), &vars(&[("ROLE", "r"), ("KIMI_NOW", "then")]), builtins());
        assert_eq!(out.unwrap(), "then|/w|LS|AG|SK|r");
        let err = render_system_prompt(&SpecPath::File(p.clone()), &vars(&[]), builtins()).unwrap_err();
        assert_eq!(err.to_string(), format!("Missing system prompt arg in {}: ROLE", p.display()));
        assert!(matches!(
            render_system_prompt(&SpecPath::File(dir.path().join("none.md")), &vars(&[]), builtins()),
            Err(SystemPromptError::Read { .. })
        ));
    }

    #[test]
    fn default_and_coder_prompts_render() {
        let default = crate::blueprint::spec::load_agent_spec(None).unwrap();
        let out = load_system_prompt(&default, builtins()).unwrap();
        assert!(out.contains("/w") && out.contains("LS") && out.contains("AG") && out.contains("SK"));
        assert!(!out.contains("${"));
        let coder = crate::blueprint::spec::load_agent_spec_at(&default.subagents[0].path).unwrap();
        assert!(load_system_prompt(&coder, builtins()).unwrap().contains("subagent"));
    }

    #[test]
    fn collect_builtins() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("agents.md"), "\n lower \n").unwrap();
        let skill = Skill {
            name: "s".into(),
            description: "d".into(),
            path: PathBuf::from("/s/SKILL.md"),
            kind: SkillKind::Standard,
        };
        let b = BuiltinArgs::collect(dir.path(), std::slice::from_ref(&skill));
        assert_eq!(b.work_dir, dir.path().display().to_string());
        assert_eq!(b.skills, render_skills_list(&[skill]));
        assert_eq!(b.work_dir_ls, work_dir_listing(dir.path()));
        // Case-insensitive file systems return the same file for both names.
        if !dir.path().join("AGENTS.md").exists() {
            assert_eq!(b.agents_md, "lower");
            fs::write(dir.path().join("AGENTS.md"), " upper ").unwrap();
            assert_eq!(read_agents_md(dir.path()), "upper");
        }
        assert!(chrono::DateTime::parse_from_rfc3339(&b.now).is_ok());
        assert_eq!(read_agents_md(&dir.path().join("missing")), "");
    }

    #[cfg(unix)]
    #[test]
    fn listing_format() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("file.txt"), "hello").unwrap();
        fs::set_permissions(d.join("file.txt"), fs::Permissions::from_mode(0o640)).unwrap();
        fs::create_dir(d.join("sub")).unwrap();
        fs::set_permissions(d.join("sub"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(d.join("missing"), d.join("broken")).unwrap();
        let sub_size = fs::metadata(d.join("sub")).unwrap().len();
        let expected: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| match e.unwrap().file_name().to_str().unwrap() {
                "file.txt" => "-rw-r-----          5 file.txt".to_string(),
                "sub" => format!("drwxr-xr-x {sub_size:>10} sub"),
                "broken" => "?---------          ? broken [stat failed]".to_string(),
                other => panic!("unexpected {other}"),
            })
            .collect();
        assert_eq!(work_dir_listing(d), expected.join("\n"));
        assert_eq!(work_dir_listing(&d.join("nope")), "");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(work_dir_listing(empty.path()), "");
    }
}
