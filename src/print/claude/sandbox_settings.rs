//! The Claude Agent SDK's `sandbox` settings (spec sandbox.md §2.6): the SDK merges them into
//! the `--settings` JSON (inline, or a file), which kiwi reads for that member only. Mapped onto
//! kiwi's `[sandbox]` keys; what kiwi cannot do stays blocked (narrower, never wider), each with
//! one warning.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::sandbox::{SandboxMode, SandboxSettings};

/// What `--settings` asks of the sandbox.
#[derive(Debug, Default, PartialEq)]
pub struct HostSandbox {
    /// `enabled: true`: the host asks for `workspace-write`.
    pub mode: Option<SandboxMode>,
    /// Lines for `kiwi: warning:`.
    pub warnings: Vec<String>,
}

/// Reads `--settings` (inline JSON, or a file path relative to `cwd`); `Err` is the detail of
/// `Cannot read --settings: <detail>`.
pub fn read(value: &str, cwd: &Path) -> Result<Value, String> {
    let trimmed = value.trim();
    let text = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        trimmed.to_string()
    } else {
        let path = cwd.join(trimmed);
        std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {}", path.display(), crate::sandbox::strerror_of(&e)))?
    };
    let json: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if !json.is_object() {
        return Err("the settings are not a JSON object".into());
    }
    Ok(json)
}

/// Applies the `sandbox` member of `settings` to `sandbox` (relative paths against `work_dir`).
pub fn apply(settings: &Value, sandbox: &mut SandboxSettings, work_dir: &Path) -> HostSandbox {
    let mut out = HostSandbox::default();
    let Some(host) = settings.get("sandbox").and_then(Value::as_object) else { return out };
    if host.get("enabled").and_then(Value::as_bool) != Some(true) {
        return out;
    }
    out.mode = Some(SandboxMode::WorkspaceWrite);
    let flag = |key: &str| host.get(key).and_then(Value::as_bool);
    if let Some(on) = flag("autoAllowBashIfSandboxed") {
        sandbox.auto_approve = on;
    }
    if let Some(on) = flag("allowUnsandboxedCommands") {
        sandbox.allow_escalation = on;
    }
    if let Some(on) = flag("enableWeakerNestedSandbox") {
        sandbox.allow_landlock_only = on;
    }
    let paths = |v: Option<&Value>| -> Vec<PathBuf> {
        let list = v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        list.iter()
            .filter_map(Value::as_str)
            .map(|p| {
                let expanded = crate::sandbox::expand(Path::new(p));
                if expanded.is_absolute() { expanded } else { work_dir.join(expanded) }
            })
            .collect()
    };
    if let Some(fs) = host.get("filesystem").and_then(Value::as_object) {
        sandbox.writable_roots.extend(paths(fs.get("allowWrite")));
        sandbox.read_only_paths.extend(paths(fs.get("denyWrite")));
        sandbox.deny_read.extend(paths(fs.get("denyRead")));
        if !paths(fs.get("allowRead")).is_empty() {
            out.warnings.push(
                "--settings sandbox.filesystem.allowRead is not supported: paths under denyRead stay unreadable".into(),
            );
        }
    }
    let excluded = host.get("excludedCommands").and_then(Value::as_array).is_some_and(|l| !l.is_empty());
    if excluded {
        out.warnings.push(
            "--settings sandbox.excludedCommands is not supported: those commands run sandboxed like any other".into(),
        );
    }
    if let Some(net) = host.get("network").and_then(Value::as_object) {
        for key in ["allowedDomains", "deniedDomains"] {
            let domains: Vec<&str> =
                net.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            if !domains.is_empty() {
                out.warnings.push(format!(
                    "--settings sandbox.network.{key} is not supported (kiwi has no filtering proxy): the network \
                     stays blocked for {}",
                    domains.join(", ")
                ));
            }
        }
        for key in [
            "allowUnixSockets",
            "allowAllUnixSockets",
            "allowLocalBinding",
            "allowMachLookup",
            "httpProxyPort",
            "socksProxyPort",
        ] {
            let set = net.get(key).is_some_and(|v| !v.is_null() && *v != Value::Bool(false));
            if set {
                out.warnings.push(format!("--settings sandbox.network.{key} is not supported: it stays blocked"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_sdk_settings_map_onto_kiwis() {
        let mut s = SandboxSettings::default();
        let host = apply(
            &json!({"sandbox": {"enabled": true, "autoAllowBashIfSandboxed": false, "allowUnsandboxedCommands": false,
                "excludedCommands": ["docker"], "filesystem": {"allowWrite": ["/abs", "rel"], "denyWrite": ["/abs/x"],
                "denyRead": ["/secret"]}, "network": {"allowedDomains": ["example.com"], "allowLocalBinding": true}}}),
            &mut s,
            Path::new("/w"),
        );
        assert_eq!(host.mode, Some(SandboxMode::WorkspaceWrite));
        assert!(!s.auto_approve && !s.allow_escalation);
        assert_eq!(s.writable_roots, [PathBuf::from("/abs"), PathBuf::from("/w/rel")]);
        assert_eq!(s.read_only_paths, [PathBuf::from("/abs/x")]);
        assert_eq!(s.deny_read, [PathBuf::from("/secret")]);
        assert_eq!(host.warnings.len(), 3, "{:?}", host.warnings);
        assert!(host.warnings[1].ends_with("the network stays blocked for example.com"));
        let mut s = SandboxSettings::default();
        assert_eq!(apply(&json!({"sandbox": {"enabled": false}}), &mut s, Path::new("/w")), HostSandbox::default());
        assert_eq!(apply(&json!({"model": "x"}), &mut s, Path::new("/w")), HostSandbox::default());
        assert_eq!(read("[1]", Path::new("/")).unwrap_err(), "the settings are not a JSON object");
        assert!(read("{bad", Path::new("/")).is_err());
        assert!(read("no-such-file.json", Path::new("/nonexistent")).unwrap_err().contains("No such file"));
    }
}
