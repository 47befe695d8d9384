//! `kiwi info [--json]` (`docs/subcommands.md` §4): versions, in the reference's keys and order;
//! the text form adds one line after them: whether this machine can sandbox commands, and with
//! which layers (`docs/sandbox.md`). The JSON line stays the reference's.
//!
//! Invariants: touches no file; the wire protocol version is the one `initialize` answers with
//! (the wire module's constant), the CLI version the one `--version` and `initialize` announce;
//! `python_version` stays a string, as clients expect, though there is no Python.

use std::process::ExitCode;

use serde_json::{Map, Value};

/// Agent spec versions kiwi reads (`blueprint::spec` accepts `version: 1`).
const AGENT_SPEC_VERSIONS: [&str; 1] = ["1"];
const PYTHON_VERSION: &str = "n/a (kiwi is written in Rust)";

/// The lines (text) or the one line (`--json`) `info` prints.
pub fn lines(json: bool) -> Vec<String> {
    let version = crate::VERSION;
    let wire = crate::wire::params::PROTOCOL_VERSION;
    if !json {
        return vec![
            format!("kimi-cli version: {version}"),
            format!("agent spec versions: {}", AGENT_SPEC_VERSIONS.join(", ")),
            format!("wire protocol: {wire}"),
            format!("python version: {PYTHON_VERSION}"),
            // kiwi's addition, after the reference's lines (spec sandbox.md §2.1).
            format!("sandbox: {}", crate::sandbox::machine_report()),
        ];
    }
    let mut obj = Map::new();
    obj.insert("kimi_cli_version".into(), version.into());
    obj.insert("agent_spec_versions".into(), AGENT_SPEC_VERSIONS.iter().map(|v| Value::from(*v)).collect());
    obj.insert("wire_protocol_version".into(), wire.into());
    obj.insert("python_version".into(), PYTHON_VERSION.into());
    let line = crate::session::pyjson::to_line(&Value::Object(obj)).unwrap_or_default();
    vec![String::from_utf8_lossy(&line).trim_end_matches('\n').to_string()]
}

pub(super) fn run(json: bool) -> ExitCode {
    for line in lines(json) {
        super::print_line(&line);
    }
    ExitCode::SUCCESS
}
