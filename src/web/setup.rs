//! What every session `kiwi web` hosts is built from (`docs/web.md` §1.2): the config file
//! (`--config-file`, given after or before `web`, else `<share>/config.toml`), loaded the way
//! every front end loads one, the `-m/--model` choice, and the global `mcp.json`.
//!
//! Invariants: the config API reads and writes the same file the sessions are built from; a
//! relative script path in it is taken from the config file's folder (`config::load`), wherever
//! the server runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::builder::{AgentChoice, AgentSetup};

/// The config every hosted session is built from (`docs/web.md` §1.2): `--config-file` (given
/// after or before `web`), else the default `<share>/config.toml`; `-m/--model` picks the model
/// until the UI switches it (`PATCH /api/config/` with `default_model`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigChoice {
    /// The `--config-file` path, absolute.
    pub file: Option<PathBuf>,
    pub model: Option<String>,
    /// `--sandbox`/`--sandbox-network`: the one other command-line choice (spec sandbox.md
    /// §2.7); they win over `[sandbox]`, also after a config change.
    pub sandbox: crate::cli::SandboxFlags,
}

impl ConfigChoice {
    /// The file the config API reads and writes.
    pub fn path(&self, share: &Path) -> PathBuf {
        self.file.clone().unwrap_or_else(|| share.join("config.toml"))
    }

    /// What hosted sessions are built from: this config, loaded the way every front end loads
    /// one (`startup::load_config`: relative script paths taken from the config file's folder),
    /// the model choice, and the global `mcp.json` when it reads (`docs/web.md` §4.8). The
    /// warnings (unknown keys, no usable model) are for the log and the start-up; `Err` is the
    /// config's error text.
    pub fn setup(&self, share: &Path) -> Result<(AgentSetup, Vec<String>), String> {
        let (config, source, mut warnings) =
            crate::startup::load_config(None, self.file.as_deref(), share).map_err(|e| match e {
                crate::startup::StartError::Usage(m) | crate::startup::StartError::Fatal(m) => m,
            })?;
        // The sandbox is probed here (fail closed), against the directory kiwi web was started
        // in; each command's policy uses its own session's work dir.
        let config_path = self.path(share);
        let protected = [config_path, share.join("mcp.json")].into_iter().filter(|p| p.is_file()).collect();
        let probe_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let (sandbox, sandbox_warnings) = crate::agent_env::SandboxRun::start(
            config.sandbox.clone(),
            self.sandbox.sandbox,
            self.sandbox.sandbox_network,
            share,
            protected,
            &probe_dir,
            &[],
        )
        .map_err(|line| format!("{line}\nSee logs: {}", share.join("logs").join("kiwi.log").display()))?;
        warnings.extend(sandbox_warnings);
        let setup = AgentSetup {
            config: Arc::new(config),
            share_dir: share.to_path_buf(),
            model: self.model.clone(),
            thinking: None,
            agent: AgentChoice::Default,
            skills_dir: None,
            yolo: false,
            config_source: source,
            system_prompt: Default::default(),
            mcp_configs: global_mcp(share),
            invocation: Default::default(),
            sandbox,
        };
        let diagnostics = setup.diagnostics();
        warnings.extend(diagnostics.warnings);
        if let Some(reason) = diagnostics.no_model {
            warnings.push(format!("{reason}; the browser UI offers to set one up"));
        }
        Ok((setup, warnings))
    }
}

/// `<share>/mcp.json`: invalid JSON or an invalid server table is logged and left out.
fn global_mcp(share: &Path) -> Vec<serde_json::Value> {
    let path = share.join("mcp.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Vec::new() };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(doc) => match crate::mcp::server_table(std::slice::from_ref(&doc)) {
            Ok(_) => vec![doc],
            Err(e) => {
                tracing::warn!("{} is not a valid MCP config ({e}); sessions start without MCP", path.display());
                Vec::new()
            }
        },
        Err(e) => {
            tracing::warn!("{} is not valid JSON ({e}); ignored", path.display());
            Vec::new()
        }
    }
}
