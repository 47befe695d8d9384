//! Claude Code's headless stream-json dialect (`print-mode.md` Part B, C.2-C.4).

pub mod args;
pub mod lines;
pub mod permission;
pub mod projection;
pub mod turn;

pub fn main(_argv: &[std::ffi::OsString]) -> std::process::ExitCode {
    std::process::ExitCode::from(2)
}
