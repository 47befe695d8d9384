//! kiwi: an agent runtime that speaks the Kimi Wire protocol over stdio.
//!
//! # Layout
//!
//! One turn's data path, from stdin to stdout:
//!
//! ```text
//! stdin → rpc::reader → wire::server (handler) → soul::TurnDriver → soul (steps, tools, approvals)
//!                          ↑ answers to our requests            │ events via soul::EventSink
//!                          └── rpc::peer ◀── wire::projection ◀── live::Fanout ◀┘  (+ session::wire_log)
//!                                                  │          (one projection per client)
//!                                        rpc::writer (sole owner of stdout) → stdout
//!
//! live::shell (runtime, signals, writer, drain, exit sweep) around it all; live::LiveSession
//! opens the session (SessionStart) and closes it (SessionEnd, tasks, bookkeeping).
//! ```
//!
//! Each module, bottom layer first (a module only uses the ones above it in this list;
//! `tests/suite/layout.rs` checks it):
//!
//! - [`browser`]: opening a page in the user's browser.
//! - [`net`]: the one place HTTP clients are built.
//! - [`sandbox`]: the OS sandbox for the commands a `Shell` call starts: modes, the `[sandbox]`
//!   settings, each command's policy (writable roots, read-only paths), the Linux mechanism
//!   (namespaces, Landlock, seccomp) behind one platform module, the fail-closed probe.
//! - [`protocol`]: the core's vocabulary: content parts, display blocks, tool calls and results,
//!   events and requests, in the shape the wire and `wire.jsonl` use.
//! - [`rpc`]: JSON-RPC 2.0 bytes ⇄ messages, generic over methods: the stdin reader (line framing,
//!   classification), the stdout writer, the queue of one client among many, the peer that asks
//!   the client and routes its answers.
//! - [`llm`]: chat providers (Kimi, OpenAI, Anthropic, Gemini, the scripted test providers) and
//!   the settings that build them.
//! - [`config`]: the config file, its defaults, choosing the model, and the models' prices
//!   (what a model call costs).
//! - [`session`]: the share dir, session folders, `context.jsonl` / `wire.jsonl` on disk.
//! - [`auth`]: the Kimi account login: stored OAuth credentials, their refresh, the chat
//!   provider and service keys that use them, and what logging in and out changes in the config
//!   (shared by `kiwi login`/`logout` and ACP's `logout`).
//! - [`agent_env`]: what a running agent works in (work dir, session, config, model).
//! - [`blueprint`]: what an agent is built from: agent files, system prompts, skills, flows.
//! - [`tools`]: the built-in tools and client-owned tools; they reach the agent loop only through
//!   [`tools::ToolHost`].
//! - [`mcp`]: the MCP client: server definitions, stdio, Streamable HTTP and legacy SSE
//!   connections, OAuth for remote servers, MCP tools as tools, the per-session connection status.
//! - [`soul`]: the running agent: the turn driver, steps, approvals, context, compaction, slash
//!   commands. Knows nothing of JSON-RPC; front ends implement [`soul::Projection`].
//! - [`builder`]: builds a ready session (soul + recorder) from a work dir and a session choice,
//!   as often as a front end needs, without touching the process.
//! - [`startup`]: logging, config loading, the one assembly of the process's agent setup, and
//!   start-up errors, shared by every entry point.
//! - [`cli`]: the command line (kimi's flags and subcommands), parsed before any front end starts.
//! - [`live`]: the live session every front end serves through (fork, undo and replay as its
//!   operations; the one history replay streamed from disk), and the process shell around front
//!   ends.
//! - [`wire`]: the Kimi Wire front end: method table, the one wire handler every transport
//!   (stdio, a browser socket, a session's `live.sock`) runs with its own rules, projection,
//!   history frames, serving; hosting a session on its socket (`wire::host`, its
//!   `session_status` frames in `wire::status`), attaching a
//!   second process's client to it and taking the session over when its host goes away
//!   (`wire::attach`, `docs/host.md`), and the client other front ends serve a hosted session
//!   through (`wire::remote`).
//! - [`acp`]: the Agent Client Protocol front end (`kiwi acp`): many sessions in one process,
//!   events as `session/update`s, approvals as permission requests, history replay on load; one
//!   dispatcher for any message transport, its sessions opened through a host (`acp::host`:
//!   this process over stdio, hosting each on its `live.sock`; the web server over `/api/acp`),
//!   or attached to a session another process hosts (`acp::attached`, over `wire::remote`).
//! - [`print`]: the headless front ends: kimi's `--print`, Claude Code's stream-json dialect and
//!   codex exec's JSONL dialect (`print::codex`), each a projection plus a run loop over the
//!   same turn driver; each hosts its session on `live.sock`, and the Claude dialect and kimi's
//!   `--print` attach to a session another process hosts (`wire::remote`).
//! - [`web`]: `kiwi web`: sessions served to browsers over HTTP and WebSocket (REST API, the
//!   wire protocol per session, ACP over `/api/acp`, the embedded UI, `/openapi.json` built
//!   from the handlers' annotations), many clients per session, every session in this one
//!   process and served on its `live.sock`; a browser socket on a session another process
//!   hosts relayed to that process (`web::relay`).
//! - [`commands`]: the subcommands that are not a server (`login`, `logout`, `info`, `mcp`).
//! - [`app`]: the process: logging, config, choosing the front end or subcommand, the exit code.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// kiwi's version (`--version`, `initialize`'s `server.version`, the start-up log line).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod acp;
pub mod agent_env;
pub mod app;
pub mod auth;
pub mod blueprint;
pub mod browser;
pub mod builder;
pub mod cli;
pub mod commands;
pub mod config;
pub mod live;
pub mod llm;
pub mod mcp;
pub mod net;
pub mod print;
pub mod protocol;
pub mod rpc;
pub mod sandbox;
pub mod session;
pub mod soul;
pub mod startup;
pub mod tools;
pub mod web;
pub mod wire;
