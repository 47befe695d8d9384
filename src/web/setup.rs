//! What every session `kiwi web` hosts is built from (`docs/web.md` §1.2): the config file
//! (`--config-file`, given after or before `web`, else `<share>/config.toml`), loaded the way
//! every front end loads one, the `-m/--model` choice, and the global `mcp.json`.
//!
//! Invariants: the config API reads and writes the same file the sessions are built from; a
//! relative script path in it is taken from the config file's folder (`config::load`), wherever
//! the server runs.

use std::path::{Path, PathBuf};

use crate::builder::AgentSetup;
use crate::startup::Choices;

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
        let failed = |e: crate::startup::StartError| match e {
            crate::startup::StartError::Usage(m) | crate::startup::StartError::Fatal(m) => m,
        };
        let (config, source, warnings) =
            crate::startup::load_config(None, self.file.as_deref(), share).map_err(failed)?;
        // The sandbox is probed against the directory kiwi web was started in; each command's
        // policy uses its own session's work dir. Its failure line points at the log.
        let probe_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let choices = Choices {
            model: self.model.clone(),
            mcp_configs: global_mcp(share),
            sandbox: (self.sandbox.sandbox, self.sandbox.sandbox_network),
            no_model: Some("the browser UI offers to set one up"),
            ..Choices::new(probe_dir)
        };
        crate::startup::agent_setup(config, source, share, choices, warnings).map_err(|e| {
            let line = failed(e);
            format!("{line}\nSee logs: {}", crate::startup::log_file(share).display())
        })
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
