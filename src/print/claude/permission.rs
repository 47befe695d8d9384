//! Who decides an approval in the Claude dialect (`docs/print-mode.md` C.3): the permission mode,
//! the allow and deny lists, and — only when someone can answer — the host over stdio.
//!
//! Invariants:
//! - the dialect's own rules come first, then the session's grants, then the host: the policy is
//!   installed on the session's approval hub ([`Policy::attach`]) so that every request reaches
//!   it; a grant (yolo, afk, approve-for-session) counts only when made in this run and only
//!   where the host would be asked (never in `dontAsk`, never against a deny list); what earlier
//!   runs saved in the session never decides here;
//! - `acceptEdits` approves an edit only when its target, resolved through symlinks, lies inside
//!   the work dir or an `--add-dir` dir and not inside a `.git` folder; anything else goes on
//!   down the list;
//! - `plan` is the core's plan mode (one meaning for every front end): choosing it switches the
//!   core's plan mode on, choosing another mode switches it off, and the mode reported is `plan`
//!   exactly while the core's plan mode is on (a resumed session may be in it); approvals follow
//!   the chosen mode, `plan` deciding as `default` does (the core itself keeps plan mode's limits);
//! - the decision never waits for an absent user: without a prompt surface the answer is a denial
//!   with a message of ours; the mode can change between decisions (`set_permission_mode`), never
//!   during one.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::Value;

use super::args::PermissionMode;
use super::tool_names::Rule;
use crate::protocol::ApprovalRequest;
use crate::soul::Agent;
use crate::soul::state::SessionState;
use crate::tools::paths::expand_home;

/// Whether the run can ask its host: `--permission-prompt-tool stdio` with stream-json input.
pub fn can_ask(args: &super::args::ClaudeArgs) -> bool {
    args.permission_prompt_tool.as_deref() == Some("stdio") && args.input_format == super::args::InputFormat::StreamJson
}

/// The file-edit tools `acceptEdits` lets through.
const EDIT_TOOLS: &[&str] = &["WriteFile", "StrReplaceFile"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Refused with this message (the call's result; the turn goes on).
    Deny(String),
    /// Refused without asking because the mode is `dontAsk` (`system/permission_denied`).
    DeniedByMode(String),
    /// Ask the host with a `can_use_tool` control request.
    Ask,
}

/// What the policy knows of its session once attached.
struct Session {
    work_dir: PathBuf,
    /// The core's state (plan mode); `None` for a session another process hosts.
    state: Option<Arc<SessionState>>,
}

pub struct Policy {
    /// The chosen mode (`plan` decides approvals as `default`).
    mode: RwLock<PermissionMode>,
    skip_all: bool,
    allowed: Vec<Rule>,
    disallowed: Vec<Rule>,
    /// `--permission-prompt-tool stdio` with stream-json input: the host can answer.
    can_ask: bool,
    /// `--add-dir`: where `acceptEdits` approves edits besides the work dir.
    add_dirs: Vec<PathBuf>,
    session: OnceLock<Session>,
}

impl Policy {
    pub fn new(
        mode: PermissionMode,
        skip_all: bool,
        allowed: Vec<String>,
        disallowed: Vec<String>,
        can_ask: bool,
    ) -> Self {
        Self {
            mode: RwLock::new(mode),
            skip_all,
            allowed: allowed.iter().map(|r| Rule::parse(r)).collect(),
            disallowed: disallowed.iter().map(|r| Rule::parse(r)).collect(),
            can_ask,
            add_dirs: Vec::new(),
            session: OnceLock::new(),
        }
    }

    /// The policy a run's command line asks for (mode, rules, whether the host can be asked).
    pub fn of(args: &super::args::ClaudeArgs) -> Self {
        Self::new(
            args.permission_mode,
            args.dangerously_skip_permissions,
            args.allowed_tools.clone(),
            args.disallowed_tools.clone(),
            can_ask(args),
        )
        .with_add_dirs(args.add_dirs.clone())
    }

    /// The `--add-dir` directories (relative ones are taken from the work dir).
    pub fn with_add_dirs(mut self, dirs: Vec<PathBuf>) -> Self {
        self.add_dirs = dirs;
        self
    }

    /// Makes this policy decide the session's approvals (before the session's grants, see the
    /// module doc) and applies `plan` to the core. Called once, before the first turn.
    pub fn attach(&self, agent: &Agent) {
        agent.approvals.let_front_end_decide();
        let session = Session { work_dir: agent.env.work_dir.clone(), state: Some(agent.state.clone()) };
        if self.session.set(session).is_err() {
            return;
        }
        if self.chosen() == PermissionMode::Plan {
            self.switch_core_plan(true);
        }
    }

    /// Makes this policy decide the approvals of a run's own turns on a session another
    /// process hosts (`super::attached`): the host's core stays as it is (its plan mode is
    /// neither read nor switched; `plan` decides as `default` does).
    pub fn attach_hosted(&self, work_dir: PathBuf) {
        let _ = self.session.set(Session { work_dir, state: None });
    }

    fn chosen(&self) -> PermissionMode {
        *self.mode.read().unwrap_or_else(|p| p.into_inner())
    }

    fn switch_core_plan(&self, on: bool) {
        if let Some(state) = self.session.get().and_then(|s| s.state.as_ref())
            && state.plan_mode() != on
        {
            state.set_plan_mode(on);
        }
    }

    /// The mode in force: `plan` exactly while the core's plan mode is on.
    pub fn mode(&self) -> PermissionMode {
        let chosen = self.chosen();
        match self.session.get().and_then(|s| s.state.as_ref()) {
            Some(state) if state.plan_mode() => PermissionMode::Plan,
            // Plan mode was left inside the session (the plan was approved, `/plan off`).
            Some(_) if chosen == PermissionMode::Plan => PermissionMode::Default,
            _ => chosen,
        }
    }

    pub fn set_mode(&self, mode: PermissionMode) {
        *self.mode.write().unwrap_or_else(|p| p.into_inner()) = mode;
        self.switch_core_plan(mode == PermissionMode::Plan);
    }

    /// The mode `system/init` reports.
    pub fn reported_mode(&self) -> PermissionMode {
        if self.skip_all { PermissionMode::BypassPermissions } else { self.mode() }
    }

    /// C.3 for `request`; `request.granted` is this run's grant, applied where the host would be
    /// asked.
    pub fn decide(&self, request: &ApprovalRequest) -> Decision {
        let tool = request.sender.as_str();
        let mode = self.chosen();
        // An escalation out of the sandbox is asked, never approved by a mode, rule or grant
        // (spec sandbox.md §2.6).
        if crate::tools::shell::is_escalation_action(&request.action) {
            let asks = self.can_ask
                && !self.skip_all
                && !matches!(mode, PermissionMode::BypassPermissions | PermissionMode::DontAsk);
            return if asks {
                Decision::Ask
            } else {
                Decision::Deny("Running commands outside the sandbox is not allowed in this session.".into())
            };
        }
        if self.skip_all || mode == PermissionMode::BypassPermissions {
            return Decision::Approve;
        }
        if mode == PermissionMode::AcceptEdits && EDIT_TOOLS.contains(&tool) && self.edits_inside(request) {
            return Decision::Approve;
        }
        let work_dir = self.session.get().map(|s| s.work_dir.as_path());
        let arguments = request.arguments.as_ref();
        if self.disallowed.iter().any(|r| r.matches(tool, arguments, work_dir)) {
            return Decision::Deny(format!("Permission to use {tool} was denied: it is in --disallowedTools."));
        }
        if self.allowed.iter().any(|r| r.matches(tool, arguments, work_dir)) {
            return Decision::Approve;
        }
        if mode == PermissionMode::DontAsk {
            return Decision::DeniedByMode(format!(
                "Permission to use {tool} was denied: the permission mode is dontAsk, and no rule allows it."
            ));
        }
        if request.granted {
            return Decision::Approve;
        }
        if self.can_ask {
            return Decision::Ask;
        }
        Decision::Deny(no_one_to_ask(tool))
    }

    /// Whether the edit's target lies inside the work dir or an `--add-dir` dir, links
    /// resolved, and outside any `.git` folder.
    fn edits_inside(&self, request: &ApprovalRequest) -> bool {
        let Some(session) = self.session.get() else { return false };
        let Some(path) = request.arguments.as_ref().and_then(|a| a.get("path")).and_then(Value::as_str) else {
            return false;
        };
        let Some(target) = real_path(&session.work_dir, path) else { return false };
        let roots = std::iter::once(session.work_dir.clone())
            .chain(self.add_dirs.iter().map(|d| session.work_dir.join(expand_home(&d.to_string_lossy()))));
        for root in roots {
            let Ok(root) = std::fs::canonicalize(&root) else { continue };
            if let Ok(inside) = target.strip_prefix(&root) {
                return !inside.components().any(|c| c.as_os_str().eq_ignore_ascii_case(".git"));
            }
        }
        false
    }
}

/// Where `path` (as a tool gets it: `~` expanded, relative to `work_dir`) really is: every link
/// on the way followed, `..` taken after the link it follows. The part that does not exist yet
/// is taken as written. `None` when it cannot be told (a dangling or looping link, no work dir).
fn real_path(work_dir: &Path, path: &str) -> Option<PathBuf> {
    let path = work_dir.join(expand_home(path));
    let mut real = PathBuf::new();
    // Components below `real` that do not exist (yet).
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => real.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if missing.pop().is_none() {
                    real.pop();
                }
            }
            Component::Normal(name) => {
                if !missing.is_empty() {
                    missing.push(name);
                    continue;
                }
                let next = real.join(name);
                match std::fs::canonicalize(&next) {
                    Ok(resolved) => real = resolved,
                    // A link whose target cannot be resolved may lead anywhere.
                    Err(_) if std::fs::symlink_metadata(&next).is_ok() => return None,
                    Err(_) => missing.push(name),
                }
            }
        }
    }
    if !real.is_absolute() {
        return None;
    }
    real.extend(missing);
    Some(real)
}

/// The denial when nobody can be asked.
pub fn no_one_to_ask(tool: &str) -> String {
    format!(
        "Permission to use {tool} was denied: nobody can be asked for it in this run (allow it with \
         --allowedTools, a permission mode, or --permission-prompt-tool stdio)."
    )
}

/// The denial when the host closed stdin with the question open.
pub fn host_gone(tool: &str) -> String {
    format!("Permission to use {tool} was denied: the host stopped answering before it decided.")
}

/// The denial when the host said no without saying why.
pub fn denied_by_host(tool: &str, message: &str) -> String {
    if message.trim().is_empty() {
        format!("Permission to use {tool} was denied by the host.")
    } else {
        message.to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(mode: PermissionMode, can_ask: bool) -> Policy {
        Policy::new(
            mode,
            false,
            vec!["ReadFile".into(), "Shell".into()],
            vec!["Shell".into(), "WriteFile".into()],
            can_ask,
        )
    }

    fn request(tool: &str, arguments: Value) -> ApprovalRequest {
        ApprovalRequest {
            id: "r".into(),
            tool_call_id: "t".into(),
            sender: tool.into(),
            action: "act".into(),
            description: String::new(),
            source_kind: Default::default(),
            source_id: None,
            agent_id: None,
            subagent_type: None,
            source_description: None,
            display: Vec::new(),
            arguments: Some(arguments),
            granted: false,
        }
    }

    fn ask(tool: &str) -> ApprovalRequest {
        request(tool, json!({}))
    }

    fn granted(tool: &str) -> ApprovalRequest {
        ApprovalRequest { granted: true, ..ask(tool) }
    }

    #[test]
    fn the_order_of_c3() {
        let p = Policy::new(PermissionMode::Default, true, vec![], vec!["Shell".into()], false);
        assert_eq!(p.decide(&ask("Shell")), Decision::Approve, "skip-permissions wins over everything");
        assert_eq!(p.reported_mode(), PermissionMode::BypassPermissions);
        assert_eq!(policy(PermissionMode::BypassPermissions, false).decide(&ask("Shell")), Decision::Approve);
        assert!(
            matches!(policy(PermissionMode::Default, true).decide(&ask("Shell")), Decision::Deny(m) if m.contains("--disallowedTools"))
        );
        assert_eq!(policy(PermissionMode::Default, false).decide(&ask("ReadFile")), Decision::Approve);
        assert_eq!(policy(PermissionMode::Default, true).decide(&ask("StrReplaceFile")), Decision::Ask);
        assert!(
            matches!(policy(PermissionMode::Default, false).decide(&ask("StrReplaceFile")), Decision::Deny(m) if m.contains("nobody can be asked"))
        );
        assert!(matches!(
            policy(PermissionMode::DontAsk, true).decide(&ask("StrReplaceFile")),
            Decision::DeniedByMode(_)
        ));
        // Not attached to a session: plan is only the mode; approvals go as in default.
        assert_eq!(policy(PermissionMode::Plan, true).decide(&ask("StrReplaceFile")), Decision::Ask);
        assert_eq!(policy(PermissionMode::Plan, true).decide(&ask("ReadFile")), Decision::Approve);
    }

    #[test]
    fn grants_of_this_run_come_after_the_dialects_rules() {
        assert_eq!(policy(PermissionMode::Default, true).decide(&granted("StrReplaceFile")), Decision::Approve);
        assert_eq!(policy(PermissionMode::Default, false).decide(&granted("StrReplaceFile")), Decision::Approve);
        assert!(matches!(policy(PermissionMode::Default, true).decide(&granted("Shell")), Decision::Deny(_)));
        assert!(matches!(
            policy(PermissionMode::DontAsk, true).decide(&granted("StrReplaceFile")),
            Decision::DeniedByMode(_)
        ));
    }

    #[test]
    fn claude_names_and_patterns_in_rules() {
        let p = Policy::new(
            PermissionMode::Default,
            false,
            vec!["Bash(git:*)".into(), "Read".into()],
            vec!["Bash(git push:*)".into()],
            false,
        );
        assert_eq!(p.decide(&request("Shell", json!({"command": "git status"}))), Decision::Approve);
        assert!(
            matches!(p.decide(&request("Shell", json!({"command": "git push"}))), Decision::Deny(m) if m.contains("disallowed"))
        );
        assert!(
            matches!(p.decide(&request("Shell", json!({"command": "rm x"}))), Decision::Deny(m) if m.contains("nobody"))
        );
        assert_eq!(p.decide(&request("ReadFile", json!({"path": "a"}))), Decision::Approve);
    }

    #[test]
    fn the_mode_changes_between_decisions() {
        let p = policy(PermissionMode::Default, false);
        p.set_mode(PermissionMode::BypassPermissions);
        assert_eq!(p.decide(&ask("StrReplaceFile")), Decision::Approve);
        assert_eq!(denied_by_host("Shell", " "), "Permission to use Shell was denied by the host.");
        assert_eq!(denied_by_host("Shell", "not now"), "not now");
    }

    #[test]
    fn real_paths_follow_links_and_keep_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let work = base.join("work");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::os::unix::fs::symlink(base.join("outside"), work.join("link")).unwrap();
        std::os::unix::fs::symlink(base.join("nowhere/x"), work.join("dangling")).unwrap();
        assert_eq!(real_path(&work, "a.txt"), Some(work.join("a.txt")));
        assert_eq!(real_path(&work, "sub/../new/dir/b.txt"), Some(work.join("new/dir/b.txt")));
        assert_eq!(real_path(&work, "link/c.txt"), Some(base.join("outside/c.txt")));
        assert_eq!(real_path(&work, "link/../d.txt"), Some(base.join("d.txt")), "`..` after the link");
        assert_eq!(real_path(&work, "new/../../e.txt"), Some(base.join("e.txt")));
        assert_eq!(real_path(&work, "dangling"), None);
        assert_eq!(real_path(&work, &base.join("outside/f").to_string_lossy()), Some(base.join("outside/f")));
    }
}
