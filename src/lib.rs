//! kiwi: an agent runtime that speaks the Kimi Wire protocol over stdio.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod config;
pub mod llm;
pub mod protocol;
pub mod runtime;
pub mod soul;
pub mod tools;
