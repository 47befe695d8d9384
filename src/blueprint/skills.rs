//! Skill discovery: `SKILL.md` files under a few well-known roots.
//!
//! Roots, lowest priority first (a later root overrides an earlier one for the same name,
//! compared case-insensitively):
//! 1. built-in skills — kiwi ships **none** (the reference's bundled third-party skill texts are
//!    deliberately not reproduced), so this level is empty;
//! 2. `--skills-dir` when given, and then levels 3 and 4 are skipped;
//! 3. the user root: the first existing of `~/.config/agents/skills`, `~/.agents/skills`,
//!    `~/.kimi/skills`, `~/.claude/skills`, `~/.codex/skills`;
//! 4. the project root: the first existing of `<work>/.agents/skills`, `<work>/.kimi/skills`,
//!    `<work>/.claude/skills`, `<work>/.codex/skills`.
//!
//! A skill is an immediate subdirectory of a root holding a regular file `SKILL.md`. Invariants
//! of the returned list: names are unique case-insensitively, the list is sorted by name in
//! code-point order, paths are absolute, and every `Flow` skill carries a validated flow.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use super::flow::{self, Flow};

pub const DEFAULT_DESCRIPTION: &str = "No description provided.";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillKind {
    Standard,
    /// A flow skill: also reachable as `/flow:<name>`.
    Flow(Flow),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Absolute path of the skill's `SKILL.md`.
    pub path: PathBuf,
    pub kind: SkillKind,
}

impl Skill {
    pub fn is_flow(&self) -> bool {
        matches!(self.kind, SkillKind::Flow(_))
    }

    pub fn flow(&self) -> Option<&Flow> {
        match &self.kind {
            SkillKind::Flow(f) => Some(f),
            SkillKind::Standard => None,
        }
    }
}

const USER_ROOTS: &[&str] =
    &[".config/agents/skills", ".agents/skills", ".kimi/skills", ".claude/skills", ".codex/skills"];
const PROJECT_ROOTS: &[&str] = &[".agents/skills", ".kimi/skills", ".claude/skills", ".codex/skills"];

fn first_existing(base: &Path, candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(|c| base.join(c)).find(|p| p.is_dir())
}

/// The skill roots to scan, lowest priority first (see the module docs).
pub fn skill_roots(home: &Path, work_dir: &Path, skills_dir: Option<&Path>) -> Vec<PathBuf> {
    match skills_dir {
        Some(dir) => vec![dir.to_path_buf()],
        None => {
            [first_existing(home, USER_ROOTS), first_existing(work_dir, PROJECT_ROOTS)].into_iter().flatten().collect()
        }
    }
}

/// Discovers all skills (see the module docs for roots and priority). kiwi bundles no built-in
/// skills, so with no roots present the result is empty.
pub fn discover(home: &Path, work_dir: &Path, skills_dir: Option<&Path>) -> Vec<Skill> {
    let mut by_key: HashMap<String, Skill> = HashMap::new();
    for root in skill_roots(home, work_dir, skills_dir) {
        for skill in scan_root(&root) {
            by_key.insert(skill.name.to_lowercase(), skill);
        }
    }
    let mut skills: Vec<Skill> = by_key.into_values().collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// Skills directly under one root; entries are visited in name order so that two directories
/// whose skills collide case-insensitively resolve deterministically (the later name wins).
fn scan_root(root: &Path) -> Vec<Skill> {
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let Ok(entries) = fs::read_dir(&root) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs.iter().filter_map(|d| load_skill(d)).collect()
}

/// Loads the skill in `dir`, or `None` when it has no readable `SKILL.md` or its frontmatter
/// is invalid.
pub fn load_skill(dir: &Path) -> Option<Skill> {
    let path = dir.join("SKILL.md");
    if !fs::metadata(&path).ok()?.is_file() {
        return None;
    }
    let text = fs::read_to_string(&path).ok()?;
    let front = match parse_frontmatter(&text) {
        Ok(front) => front.unwrap_or_default(),
        Err(e) => {
            tracing::warn!("skipping skill {}: {e}", path.display());
            return None;
        }
    };
    let field = |key: &str| front.get(key).and_then(scalar_string).filter(|s| !s.is_empty());
    let dir_name = dir.file_name()?.to_string_lossy().into_owned();
    let name = field("name").unwrap_or(dir_name);
    let description = field("description").unwrap_or_else(|| DEFAULT_DESCRIPTION.to_string());
    let kind = match field("type").as_deref() {
        None | Some("standard") => SkillKind::Standard,
        Some("flow") => match flow::parse_flow_from_skill(&text) {
            Ok(Some(f)) => SkillKind::Flow(f),
            Ok(None) => {
                tracing::warn!("flow skill {} has no mermaid/d2 diagram; treating it as standard", path.display());
                SkillKind::Standard
            }
            Err(e) => {
                tracing::warn!("flow skill {} has an invalid diagram ({e}); treating it as standard", path.display());
                SkillKind::Standard
            }
        },
        Some(other) => {
            tracing::warn!("skipping skill {}: unknown type {other:?}", path.display());
            return None;
        }
    };
    Some(Skill { name, description, path, kind })
}

/// Non-null scalars as text (YAML `name: 42` names the skill "42"); collections are ignored.
fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Frontmatter of a markdown document.
///
/// `Ok(None)` when there is none: the first line (trimmed) is not `---`, there is no closing
/// line trimming to `---`, or the block is blank. `Err` when the block is not YAML or not a
/// mapping — such a skill is skipped.
pub fn parse_frontmatter(text: &str) -> Result<Option<HashMap<String, Value>>, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Ok(None);
    }
    let mut block = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim() == "---" {
            closed = true;
            break;
        }
        block.push(line);
    }
    let block = block.join("\n");
    if !closed || block.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_yaml::from_str(&block).map_err(|e| format!("invalid frontmatter YAML: {e}"))?;
    let Value::Mapping(map) = value else {
        return Err("frontmatter YAML must be a mapping".to_string());
    };
    Ok(Some(map.into_iter().filter_map(|(k, v)| scalar_string(&k).map(|k| (k, v))).collect()))
}

/// The user message of `/skill:<name> [args]`: the whole `SKILL.md` (frontmatter included),
/// trimmed, plus the user's request when `args` is non-empty.
pub fn skill_command_text(skill: &Skill, args: &str) -> Result<String, std::io::Error> {
    let text = fs::read_to_string(&skill.path)?;
    let mut out = text.trim().to_string();
    if !args.is_empty() {
        out.push_str("\n\nUser request:\n");
        out.push_str(args);
    }
    Ok(out)
}

/// Slash commands contributed by skills as `(command name, description)`: `skill:<name>` for
/// every skill in list order, then `flow:<name>` for every flow skill.
pub fn skill_commands(skills: &[Skill]) -> Vec<(String, String)> {
    let standard = skills.iter().map(|s| (format!("skill:{}", s.name), s.description.clone()));
    let flows = skills.iter().filter(|s| s.is_flow()).map(|s| (format!("flow:{}", s.name), s.description.clone()));
    standard.chain(flows).collect()
}

/// The `${KIMI_SKILLS}` text of the system prompt.
pub fn render_skills_list(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return "No skills found.".to_string();
    }
    let lines: Vec<String> = skills
        .iter()
        .map(|s| format!("- {}\n  - Path: {}\n  - Description: {}", s.name, s.path.display(), s.description))
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, dir: &str, content: &str) -> PathBuf {
        let d = root.join(dir);
        fs::create_dir_all(&d).unwrap();
        let p = d.join("SKILL.md");
        fs::write(&p, content).unwrap();
        p
    }

    fn names(skills: &[Skill]) -> Vec<&str> {
        skills.iter().map(|s| s.name.as_str()).collect()
    }

    const FLOW_MD: &str = "---\nname: deploy\ntype: flow\n---\n```mermaid\nBEGIN --> a[ship] --> END\n```\n";

    #[test]
    fn no_roots_means_no_skills() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        assert!(discover(home.path(), work.path(), None).is_empty());
    }

    #[test]
    fn user_root_is_first_existing_candidate_only() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        write_skill(&home.path().join(".kimi/skills"), "one", "x");
        write_skill(&home.path().join(".claude/skills"), "two", "x");
        assert_eq!(names(&discover(home.path(), work.path(), None)), vec!["one"]);
        write_skill(&home.path().join(".config/agents/skills"), "zero", "x");
        assert_eq!(names(&discover(home.path(), work.path(), None)), vec!["zero"]);
        // An existing but empty earlier root still wins.
        fs::create_dir_all(home.path().join(".agents/skills")).unwrap();
        fs::remove_dir_all(home.path().join(".config")).unwrap();
        assert!(discover(home.path(), work.path(), None).is_empty());
    }

    #[test]
    fn project_overrides_user_case_insensitively() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        write_skill(&home.path().join(".codex/skills"), "Review", "---\ndescription: user\n---\n");
        write_skill(&home.path().join(".codex/skills"), "zeta", "");
        write_skill(&work.path().join(".claude/skills"), "other", "---\nname: review\ndescription: project\n---\n");
        write_skill(&work.path().join(".codex/skills"), "ignored", "");
        let skills = discover(home.path(), work.path(), None);
        assert_eq!(names(&skills), vec!["review", "zeta"]);
        assert_eq!(skills[0].description, "project");
        assert!(skills[0].path.ends_with(".claude/skills/other/SKILL.md"));
        assert!(skills[0].path.is_absolute());
    }

    #[test]
    fn skills_dir_replaces_user_and_project_roots() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let custom = tempfile::tempdir().unwrap();
        write_skill(&home.path().join(".kimi/skills"), "user", "");
        write_skill(&work.path().join(".kimi/skills"), "proj", "");
        write_skill(custom.path(), "mine", "");
        assert_eq!(names(&discover(home.path(), work.path(), Some(custom.path()))), vec!["mine"]);
    }

    #[test]
    fn sorted_by_code_point() {
        let root = tempfile::tempdir().unwrap();
        for n in ["b", "C", "a", "Ä"] {
            write_skill(root.path(), &format!("d{n}"), &format!("---\nname: {n}x\n---\n"));
        }
        let skills = discover(root.path(), root.path(), Some(root.path()));
        assert_eq!(names(&skills), vec!["Cx", "ax", "bx", "Äx"]);
    }

    #[test]
    fn frontmatter_rules() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_skill(r, "plain", "no frontmatter\n---\nname: nope\n---\n");
        write_skill(r, "unclosed", "---\nname: x\n");
        write_skill(r, "empty", "---\n\n---\nbody");
        write_skill(r, "spaced", "  ---  \nname: spaced-name\ndescription: ''\n --- \n");
        write_skill(r, "badyaml", "---\nname: [unclosed\n---\n");
        write_skill(r, "notmap", "---\n- a\n- b\n---\n");
        write_skill(r, "comment", "---\n# only a comment\n---\n");
        write_skill(r, "badtype", "---\ntype: weird\n---\n");
        write_skill(r, "std", "---\ntype: standard\ndescription: Does things\n---\n");
        write_skill(r, "numname", "---\nname: 42\n---\n");
        fs::create_dir_all(r.join("nofile")).unwrap();
        fs::create_dir_all(r.join("dirfile/SKILL.md")).unwrap();
        fs::write(r.join("loose.md"), "x").unwrap();
        let skills = discover(r, r, Some(r));
        assert_eq!(names(&skills), vec!["42", "empty", "plain", "spaced-name", "std", "unclosed"]);
        let by = |n: &str| skills.iter().find(|s| s.name == n).unwrap();
        assert_eq!(by("plain").description, DEFAULT_DESCRIPTION);
        assert_eq!(by("spaced-name").description, DEFAULT_DESCRIPTION);
        assert_eq!(by("std").description, "Does things");
        assert_eq!(by("std").kind, SkillKind::Standard);
    }

    #[test]
    fn flow_skills_and_downgrade() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_skill(r, "deploy", FLOW_MD);
        write_skill(r, "broken", "---\ntype: flow\n---\n```mermaid\nA --> B\n```\n");
        write_skill(r, "nodiagram", "---\ntype: flow\n---\ntext\n");
        write_skill(r, "d2flow", "---\ntype: flow\n---\n```d2\nBEGIN -> END\n```\n");
        let skills = discover(r, r, Some(r));
        let by = |n: &str| skills.iter().find(|s| s.name == n).unwrap();
        assert!(by("deploy").is_flow());
        assert_eq!(by("deploy").flow().unwrap().begin().id, "BEGIN");
        assert!(by("d2flow").is_flow());
        assert_eq!(by("broken").kind, SkillKind::Standard);
        assert_eq!(by("nodiagram").kind, SkillKind::Standard);
    }

    #[test]
    fn skill_command_text_includes_frontmatter_and_args() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "s", "\n---\nname: s\n---\nDo it.\n\n");
        let skill = load_skill(&root.path().join("s")).unwrap();
        assert_eq!(skill_command_text(&skill, "").unwrap(), "---\nname: s\n---\nDo it.");
        assert_eq!(
            skill_command_text(&skill, "now please").unwrap(),
            "---\nname: s\n---\nDo it.\n\nUser request:\nnow please"
        );
        fs::remove_file(&skill.path).unwrap();
        assert!(skill_command_text(&skill, "").is_err());
    }

    #[test]
    fn commands_list_flows_last() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "a", "---\ndescription: A\n---\n");
        write_skill(root.path(), "deploy", FLOW_MD);
        write_skill(root.path(), "z", "");
        let skills = discover(root.path(), root.path(), Some(root.path()));
        let cmds: Vec<String> = skill_commands(&skills).into_iter().map(|(n, _)| n).collect();
        assert_eq!(cmds, vec!["skill:a", "skill:deploy", "skill:z", "flow:deploy"]);
        assert_eq!(skill_commands(&skills)[0].1, "A");
    }

    #[test]
    fn renders_skill_list() {
        assert_eq!(render_skills_list(&[]), "No skills found.");
        let mk = |n: &str, d: &str| Skill {
            name: n.into(),
            description: d.into(),
            path: PathBuf::from(format!("/s/{n}/SKILL.md")),
            kind: SkillKind::Standard,
        };
        assert_eq!(
            render_skills_list(&[mk("a", "first"), mk("b", "second")]),
            "- a\n  - Path: /s/a/SKILL.md\n  - Description: first\n- b\n  - Path: /s/b/SKILL.md\n  - Description: second"
        );
    }
}
