//! Systems without a sandbox implementation (macOS and Windows are designed on paper only,
//! docs/sandbox.md): the same items as `linux`, every one failing with "not supported", so a
//! sandboxed run refuses to start (spec sandbox.md §5.3). A port replaces this file.

use std::sync::Arc;

use super::Layer;
use super::policy::Paths;

/// Why nothing can be prepared here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure;

impl Failure {
    pub fn decode(_error: &std::io::Error) -> Option<Self> {
        None
    }

    pub fn layer(self) -> Layer {
        Layer::Unsupported
    }

    pub fn describe(self) -> String {
        format!("not supported on {}", std::env::consts::OS)
    }
}

pub struct Prepared;

pub struct ProbeReport {
    pub landlock_abi: u32,
}

pub fn prepare(_paths: &Paths, _network_blocked: bool, _namespaces: bool) -> Result<Prepared, Failure> {
    Err(Failure)
}

pub fn install(_prepared: Arc<Prepared>, _cmd: &mut std::process::Command) {}

pub fn install_tokio(_prepared: Arc<Prepared>, _cmd: &mut tokio::process::Command) {}

pub fn probe(_paths: &Paths, _network_blocked: bool, _namespaces: bool) -> Result<ProbeReport, Failure> {
    Err(Failure)
}

pub fn landlock_has_scopes(_abi: u32) -> bool {
    false
}

pub fn unsupported() -> Option<&'static str> {
    Some(std::env::consts::OS)
}
