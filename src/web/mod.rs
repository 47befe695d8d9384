//! `kiwi web`: sessions served to browsers and scripts over HTTP (`docs/web.md`): a browser UI at
//! `/`, a REST API under `/api/`, and one WebSocket per session that carries the Kimi Wire
//! protocol (1.10) exactly as a stdio client sees it, plus the server's own `history_complete`
//! and `session_status` messages.
//!
//! Every session runs in this one process on its [`crate::live::LiveSession`] (no worker process
//! per session): [`hosted`] opens each session once, keeps its status (`session_status`'s state
//! machine) and the sockets attached to it; [`socket`] is one WebSocket client, attached to the
//! live session at the seam so its history replay and its live stream meet without loss or
//! duplicates. Each open session is also served on its `live.sock` to other kiwi processes
//! (`wire::host`); a session another process holds is reached through its socket ([`relay`]). [`router`] puts the HTTP stack together with the guards (CORS, LAN-only, Host,
//! Origin, token); [`rest`] holds the REST endpoints and [`ui`] the embedded browser UI;
//! [`serve`] is the command: settings, port probing, the banner, serving, shutdown; [`listen`]
//! is its accept loop with the connection limits (head-read timeout, connection cap); [`setup`]
//! is what sessions are built from (the config file, `-m`), [`environment`] the `KIMI_WEB_*`
//! settings `src/main.rs` took out of the process environment.
//!
//! Invariants: one slow or dead socket never slows the others or the turn (each socket has a
//! bounded queue and is disconnected when it overflows); the token and the other `KIMI_WEB_*`
//! settings never reach a tool's environment; every socket is closed (1012) and every session
//! closed at shutdown.

pub mod acp_socket;
pub mod environment;
pub mod errors;
pub mod guard;
pub mod hosted;
pub mod listen;
pub mod openapi;
pub mod projection;
pub mod queue;
pub mod relay;
pub mod rest;
pub mod router;
pub mod serve;
pub mod settings;
pub mod setup;
pub mod socket;
pub mod state;
pub mod ui;
