//! The OS sandbox for the commands a `Shell` call starts (spec sandbox.md; docs/sandbox.md).
//!
//! A low layer: it knows paths, modes and processes, nothing of sessions, tools or protocols.
//! The config layer parses `[sandbox]` into [`SandboxSettings`]; a front end builds one
//! [`Sandbox`] per run (settings + `--sandbox`/`--sandbox-network` + the share dir and config
//! files to protect), calls [`Sandbox::probe`] once before serving (fail closed, §5.3), and for
//! every command asks [`Sandbox::policy_for`] for a [`CommandPolicy`] whose
//! [`CommandPolicy::apply`] installs the set-up in the child (§5.1). The file tools ask
//! [`Sandbox::check_write`] and [`Sandbox::read_denied`] (§6.3, §4).
//!
//! Files:
//! * `mode.rs`: [`SandboxMode`] and its names (flag, config, wire).
//! * `settings.rs`: the `[sandbox]` table as data.
//! * `policy.rs`: writable roots, read-only paths, denied paths; the file tools' verdicts.
//! * `linux/`: the mechanism (namespaces, Landlock, seccomp) — the only platform code;
//!   `other.rs` stands in for it elsewhere and refuses. A port replaces `other.rs` for its
//!   system with one file exposing the same items.
//! * this file: [`Sandbox`], [`CommandPolicy`], the start-up messages and the texts the model
//!   reads (the Shell description, the denial note of §7).

mod mode;
mod policy;
mod settings;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
use other as platform;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use mode::SandboxMode;
pub use policy::{BLOCKED_BRIEF, Paths, WriteVerdict, read_denied_message, resolve_lenient};
pub use settings::{SandboxSettings, check_path, expand};

/// Which layer of the mechanism a failure belongs to (it decides the start-up message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Landlock,
    /// The user and mount namespace view.
    Namespaces,
    /// Capabilities, no_new_privs, seccomp.
    Process,
    /// No implementation for this system.
    Unsupported,
}

/// The sandbox of one run: its settings, the mode and network the flags and config chose, and
/// what must stay read-only besides the roots' own folders.
#[derive(Debug, Clone)]
pub struct Sandbox {
    settings: SandboxSettings,
    mode: SandboxMode,
    network: bool,
    share_dir: PathBuf,
    protected_files: Vec<PathBuf>,
    /// `$TMPDIR` of kiwi's environment when absolute (read once: kiwi never changes it).
    tmpdir: Option<PathBuf>,
    /// Set by the probe where user namespaces are unusable and the config allows the weaker
    /// sandbox.
    landlock_only: bool,
}

impl Sandbox {
    /// The run's sandbox: `mode_flag` (`--sandbox`) wins over `[sandbox] mode`;
    /// `network_flag` (`--sandbox-network`) or `[sandbox] network` let commands use the
    /// network. `protected_files` are the config file in use and the MCP config files.
    pub fn new(
        settings: SandboxSettings,
        mode_flag: Option<SandboxMode>,
        network_flag: bool,
        share_dir: PathBuf,
        protected_files: Vec<PathBuf>,
    ) -> Self {
        let mode = mode_flag.unwrap_or(settings.mode);
        let network = network_flag || settings.network;
        let tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from).filter(|p| p.is_absolute());
        Self { settings, mode, network, share_dir, protected_files, tmpdir, landlock_only: false }
    }

    /// No sandbox (today's behavior).
    pub fn off() -> Self {
        Self::new(SandboxSettings::default(), Some(SandboxMode::Off), false, PathBuf::new(), Vec::new())
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// Whether commands are confined.
    pub fn is_on(&self) -> bool {
        self.mode.is_sandboxed()
    }

    /// Whether commands may use the network (always with the sandbox off).
    pub fn network_allowed(&self) -> bool {
        !self.is_on() || self.network
    }

    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// Whether the probe fell back to Landlock and seccomp only.
    pub fn landlock_only(&self) -> bool {
        self.landlock_only
    }

    /// The fail-closed start-up check (spec §5.3): the whole set-up once in a throw-away child.
    /// `Ok` carries warning lines (without the `kiwi: warning: ` prefix); `Err` the one line a
    /// sandboxed run stops with. Nothing to do with the sandbox off.
    pub fn probe(&mut self, work_dir: &Path, added_dirs: &[PathBuf]) -> Result<Vec<String>, String> {
        if !self.is_on() {
            return Ok(Vec::new());
        }
        if let Some(os) = platform::unsupported() {
            return Err(format!("Cannot start the sandbox ({}): not supported on {os}; use --sandbox off", self.mode));
        }
        let paths = self.paths_for(work_dir, added_dirs);
        let blocked = !self.network_allowed();
        let mut warnings = Vec::new();
        let report = match platform::probe(&paths, blocked, true) {
            Ok(report) => report,
            Err(failure) if failure.layer() == Layer::Namespaces && self.settings.allow_landlock_only => {
                let report =
                    platform::probe(&paths, blocked, false).map_err(|f| self.start_error(f.layer(), &f.describe()))?;
                self.landlock_only = true;
                warnings.push(format!(
                    "user namespaces are not usable ({}): the sandbox runs with Landlock and seccomp only; read-only \
                     paths such as .git, chmod/chown/utime/xattrs outside the writable roots and deny_read are not \
                     enforced",
                    failure.describe()
                ));
                report
            }
            Err(failure) => return Err(self.start_error(failure.layer(), &failure.describe())),
        };
        if !platform::landlock_has_scopes(report.landlock_abi) {
            warnings.push(format!(
                "this kernel's Landlock (ABI {}) cannot stop sandboxed commands from signalling other processes",
                report.landlock_abi
            ));
        }
        Ok(warnings)
    }

    /// The §5.3 line for a failed layer.
    fn start_error(&self, layer: Layer, detail: &str) -> String {
        let mode = self.mode;
        match layer {
            Layer::Landlock => format!(
                "Cannot start the sandbox ({mode}): Landlock is not available ({detail}); use --sandbox off to run \
                 commands without it"
            ),
            Layer::Namespaces => format!(
                "Cannot start the sandbox ({mode}): user namespaces are not usable ({detail}); set [sandbox] \
                 allow_landlock_only = true for a weaker sandbox, or use --sandbox off"
            ),
            Layer::Process => format!(
                "Cannot start the sandbox ({mode}): the process restrictions failed ({detail}); use --sandbox off to \
                 run commands without it"
            ),
            Layer::Unsupported => format!("Cannot start the sandbox ({mode}): {detail}; use --sandbox off"),
        }
    }

    /// The policy of one command started in `work_dir` (spec §3.2, §3.3), prepared for the
    /// fork. `Err` is the reason for `Command not run: the sandbox could not be set up (…).`
    /// With the sandbox off: [`CommandPolicy::unconfined`].
    pub fn policy_for(&self, work_dir: &Path, added_dirs: &[PathBuf]) -> Result<CommandPolicy, String> {
        if !self.is_on() {
            return Ok(CommandPolicy::unconfined());
        }
        let paths = self.paths_for(work_dir, added_dirs);
        let blocked = !self.network_allowed();
        let prepared = platform::prepare(&paths, blocked, !self.landlock_only).map_err(|f| f.describe())?;
        Ok(CommandPolicy { mode: self.mode, network_blocked: blocked, paths, prepared: Some(Arc::new(prepared)) })
    }

    /// What the Shell tool's description tells the model (spec §7, prose ours).
    pub fn describe(&self, work_dir: &Path, added_dirs: &[PathBuf]) -> String {
        let network = if self.network_allowed() { "they may use the network" } else { "they cannot use the network" };
        match self.mode {
            SandboxMode::Off => "Commands run without a sandbox.".to_string(),
            SandboxMode::ReadOnly => {
                format!("Commands run in the read-only sandbox: they cannot write files, and {network}.")
            }
            SandboxMode::WorkspaceWrite => {
                let roots = self.paths_for(work_dir, added_dirs).writable_roots;
                let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                format!(
                    "Commands run in the workspace-write sandbox: they may write only in {}; .git and the agent \
                     configuration folders there stay read-only; {network}.",
                    roots.join(", ")
                )
            }
        }
    }

    /// The sentences appended to a failed command's message when the sandbox may have blocked
    /// it (spec §7), with their leading space.
    pub fn denial_note(&self, escalation_possible: bool) -> String {
        let blocked = !self.network_allowed();
        let mut note = match self.mode {
            SandboxMode::Off => return String::new(),
            SandboxMode::WorkspaceWrite => format!(
                " The command ran in the workspace-write sandbox, which may have blocked it: commands may write only \
                 in the work dir, the added dirs and the temp dirs{}.",
                if blocked { ", and cannot use the network" } else { "" }
            ),
            SandboxMode::ReadOnly => format!(
                " The command ran in the read-only sandbox, which may have blocked it: commands cannot write files{}.",
                if blocked { " or use the network" } else { "" }
            ),
        };
        note.push_str(if escalation_possible {
            " To run it outside the sandbox, call Shell again with \"sandbox_permissions\": \"require_escalated\" and \
             a \"justification\"; the user will be asked."
        } else {
            " It cannot run outside the sandbox in this session."
        });
        note
    }
}

/// Output of a failed command that suggests the sandbox stopped it (spec §7; codex's list plus
/// EXDEV's text).
const DENIAL_MARKERS: [&str; 7] = [
    "operation not permitted",
    "permission denied",
    "read-only file system",
    "invalid cross-device link",
    "seccomp",
    "sandbox",
    "landlock",
];

/// Linux's SIGSYS (the same number on x86_64 and aarch64).
const SIGSYS: i32 = 31;

/// Whether a sandboxed command's failure gets the denial note: it exited non-zero and its
/// output names a denial, or it died of SIGSYS.
pub fn looks_denied(exit_code: Option<i32>, signal: Option<i32>, output: &str) -> bool {
    if signal == Some(SIGSYS) {
        return true;
    }
    if exit_code == Some(0) {
        return false;
    }
    let lower = output.to_lowercase();
    DENIAL_MARKERS.iter().any(|m| lower.contains(m))
}

/// The reason a spawn failed in the sandbox set-up (`<step>: <strerror>`), or `None` when the
/// spawn error is not the sandbox's.
pub fn setup_failure(error: &std::io::Error) -> Option<String> {
    platform::Failure::decode(error).map(|f| f.describe())
}

/// An I/O error's text without std's ` (os error N)` suffix.
pub fn strerror_of(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The tool result of a command whose sandbox could not be set up (spec §5.3).
pub fn command_not_run_message(reason: &str) -> String {
    format!("Command not run: the sandbox could not be set up ({reason}).")
}

/// One command's confinement, ready to install in a child.
#[derive(Clone)]
pub struct CommandPolicy {
    mode: SandboxMode,
    network_blocked: bool,
    paths: Paths,
    prepared: Option<Arc<platform::Prepared>>,
}

impl std::fmt::Debug for CommandPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandPolicy")
            .field("mode", &self.mode)
            .field("network_blocked", &self.network_blocked)
            .field("paths", &self.paths)
            .finish()
    }
}

impl CommandPolicy {
    /// No confinement: the sandbox is off, or the user approved an escalation.
    pub fn unconfined() -> Self {
        Self { mode: SandboxMode::Off, network_blocked: false, paths: Paths::default(), prepared: None }
    }

    pub fn is_confined(&self) -> bool {
        self.prepared.is_some()
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    pub fn network_blocked(&self) -> bool {
        self.network_blocked
    }

    /// The resolved roots and paths the policy was computed from.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The environment a confined command gets on top of its own (spec §3.7).
    pub fn env(&self) -> Vec<(&'static str, &'static str)> {
        if !self.is_confined() {
            return Vec::new();
        }
        let mut env = vec![("KIWI_SANDBOX", self.mode.as_str())];
        if self.network_blocked {
            env.push(("KIWI_SANDBOX_NETWORK_DISABLED", "1"));
        }
        env
    }

    /// Installs the confinement on a tokio command: the environment, and the set-up as the
    /// last `pre_exec` step (call it after the caller's own `pre_exec`, e.g. `setsid`). A
    /// set-up failure makes the spawn fail; [`setup_failure`] reads its reason.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        let Some(prepared) = &self.prepared else { return };
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        platform::install_tokio(prepared.clone(), cmd);
    }

    /// The same for a std command.
    pub fn apply_std(&self, cmd: &mut std::process::Command) {
        let Some(prepared) = &self.prepared else { return };
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        platform::install(prepared.clone(), cmd);
    }
}

/// What `kiwi info` says about this machine: whether it can sandbox and with which layers.
pub fn machine_report() -> String {
    if let Some(os) = platform::unsupported() {
        return format!("not supported on {os}");
    }
    let probe_dir = std::env::temp_dir();
    let sandbox =
        Sandbox::new(SandboxSettings::default(), Some(SandboxMode::WorkspaceWrite), false, PathBuf::new(), Vec::new());
    let paths = sandbox.paths_for(&probe_dir, &[]);
    let scopes = |abi: u32| {
        if platform::landlock_has_scopes(abi) { "" } else { " (without the signal scope)" }
    };
    match platform::probe(&paths, true, true) {
        Ok(r) => format!(
            "available (user and mount namespaces, Landlock ABI {}{}, seccomp network filter)",
            r.landlock_abi,
            scopes(r.landlock_abi)
        ),
        Err(f) if f.layer() == Layer::Namespaces => match platform::probe(&paths, true, false) {
            Ok(r) => format!(
                "Landlock ABI {}{} and seccomp only, with [sandbox] allow_landlock_only = true (user namespaces are \
                 not usable: {})",
                r.landlock_abi,
                scopes(r.landlock_abi),
                f.describe()
            ),
            Err(g) => format!("unavailable ({})", g.describe()),
        },
        Err(f) => format!("unavailable ({})", f.describe()),
    }
}

#[cfg(test)]
mod tests;
