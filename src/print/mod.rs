//! Print mode: headless runs in kimi's `--print` dialect, in Claude Code's stream-json
//! dialect (`docs/print-mode.md`) and in codex exec's JSONL dialect (`docs/codex-exec.md`), the
//! third front end beside wire (and ACP).
//!
//! Each dialect is a projection of the soul's events ([`crate::soul::Projection`]) plus a run
//! loop that feeds turns to the soul's [`crate::soul::TurnDriver`]. Recording to `wire.jsonl`
//! happens in the soul's sink, so a print session resumes from wire and the other way round.
//!
//! Invariants: stdout carries only the dialect's lines, all through the one writer
//! (`rpc::writer`); progress, warnings and errors go to stderr or the log; every turn's outcome
//! reaches the run loop through the tag it was started with, after every line of the turn.

pub mod claude;
pub mod codex;
pub mod common;
pub mod dialect;
pub mod kimi;
