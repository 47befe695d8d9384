//! kiwi: an agent runtime that speaks the Kimi Wire protocol over stdio.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod agent_env;
pub mod app;
pub mod blueprint;
pub mod builder;
pub mod cli;
pub mod config;
pub mod llm;
pub mod net;
pub mod protocol;
pub mod rpc;

pub mod session;
pub mod soul;
pub mod tools;
pub mod wire;
