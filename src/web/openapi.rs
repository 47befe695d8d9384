//! `GET /openapi.json` (`docs/web.md` §7): the OpenAPI 3.1 document of every HTTP route of
//! `kiwi web`, for custom UIs and generated clients. Its paths and operations are the handlers'
//! own `#[utoipa::path]` annotations, collected while the routes are made (`web::rest::Routes`),
//! so a route is documented exactly as it is served; the bodies' shapes are the schemas below
//! (`docs/web-api.md`). The two WebSockets, which OpenAPI cannot describe, are in the document's
//! `x-websockets` extension: their URL, handshake, refusals and frames.
//!
//! Invariants: the document is built once per process (it does not depend on the request or the
//! mode); it is served under the API's guards (the token, the Origin rule), like `/api/`.

#![allow(dead_code)] // The schema types only describe JSON the handlers write themselves.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::path::Paths;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// The document, as served.
pub fn document_json() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let (_, paths) = super::router::documented_routes().split();
        serde_json::to_string(&document(paths)).unwrap_or_default()
    })
}

/// The document with `paths`.
pub fn document(paths: Paths) -> utoipa::openapi::OpenApi {
    let mut doc = Document::openapi();
    doc.paths = paths;
    doc.info.version = crate::VERSION.to_string();
    let extensions = doc.extensions.get_or_insert_with(Extensions::default);
    extensions.insert("x-websockets".into(), websockets());
    doc
}

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "This document (OpenAPI 3.1).", content_type = "application/json",
        body = Object)))]
pub async fn serve() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document_json()).into_response()
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kiwi web",
        description = "The HTTP API of `kiwi web` (the API of `kimi web`, kimi-cli 1.49, plus kiwi's additions): \
            sessions, their files and uploads, git diff stats, work dirs, config, open-in. Every `/api/` route and \
            this document need the server's token (`Authorization: Bearer <token>`, or `?token=` on a GET) unless \
            the server runs with `--dangerously-omit-auth`. Errors are `{\"detail\": <text>}`; invalid input is \
            422 with FastAPI's list shape. The WebSockets are described in `x-websockets`.",
    ),
    modifiers(&Security),
    components(schemas(
        Detail, Invalid, InvalidItem, Session, SessionStatus, SessionState, CreateSession, UpdateSession,
        ForkRequest, TitleRequest, TitleAnswer, UploadForm, Uploaded, Entry, EntryKind, GitDiffStats, GitFileDiff,
        KiwiMarks, KiwiApprovalMark,
        ConfigView, ConfigModel, SandboxView, ConfigPatch, ConfigPatched, ConfigToml, ConfigTomlWrite,
        ConfigTomlWritten, OpenIn, OpenInApp, OpenInAnswer, Health,
    )),
    tags(
        (name = "sessions", description = "`docs/web-api.md` §2"),
        (name = "files", description = "`docs/web-api.md` §3"),
        (name = "work-dirs", description = "`docs/web-api.md` §4"),
        (name = "config", description = "`docs/web-api.md` §5"),
        (name = "open-in", description = "`docs/web-api.md` §6"),
        (name = "meta", description = "Health and this document"),
    ),
)]
struct Document;

/// The token: a bearer header, or the `token` query parameter of a GET.
struct Security;

impl Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme("query_token", SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::new("token"))));
        doc.security = Some(vec![
            utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new()),
            utoipa::openapi::security::SecurityRequirement::new("query_token", Vec::<String>::new()),
        ]);
    }
}

/// The `x-websockets` extension: the two sockets, their handshake and their frames.
fn websockets() -> serde_json::Value {
    let handshake = "HTTP GET with `Upgrade: websocket`. Refused with HTTP 403 before the upgrade when the client \
        is outside the local network (LAN-only mode), sends an `Origin` the CORS rule does not allow, or lacks the \
        server's token in the `token` query parameter (the Authorization header does not count). Each socket counts \
        against the server's connection cap while it is open. At shutdown the server closes it with 1012.";
    json!({
        "/api/sessions/{session_id}/stream": {
            "summary": "One client of one hosted session: the Kimi Wire protocol 1.10 (docs/web.md §3).",
            "handshake": handshake,
            "parameters": {"session_id": "The session's UUID (not a UUID → 403).", "token": "The server's token."},
            "frames": "Text frames, one JSON-RPC 2.0 message each, both ways, exactly as a `kiwi --wire` client \
                sees them on stdio (requests `initialize`, `prompt`, `steer`, `cancel`, `replay`, `set_plan_mode`…; \
                notifications `event`; requests `request` to the client, answered by id). The server first sends \
                the session's stored history (`wire.jsonl`), then `{\"jsonrpc\":\"2.0\",\"method\":\"history_complete\",\
                \"id\":<uuid>}`, then the live stream, and `session_status` notifications ({session_id, state: \
                stopped|idle|busy|restarting|error, seq, worker_id, reason, detail, updated_at}) whenever the \
                status changes. A frame that is not valid JSON-RPC gets the JSON-RPC error the stdio server gives.",
            "close_codes": {"1001": "Session process exited (the session was deleted)", "1008": "Client too slow",
                "1012": "Server shutting down", "4004": "Session not found"}
        },
        "/api/acp": {
            "summary": "The Agent Client Protocol (v1) over a WebSocket (docs/web.md §6): the agent `kiwi acp` \
                is on stdio, with the sessions of this server.",
            "handshake": handshake,
            "parameters": {"token": "The server's token."},
            "frames": "Text frames, one ACP JSON-RPC 2.0 message each, both ways (`initialize`, `session/new`, \
                `session/load`, `session/prompt`, `session/update` notifications, `session/request_permission` \
                requests to the client, …). A session made or loaded here is hosted by the server: the browser \
                lists it and its sockets watch its turns, and this client sees theirs. A frame that is not \
                JSON-RPC gets the error `kiwi acp` gives for the same line; binary frames are ignored.",
            "close_codes": {"1012": "Server shutting down"}
        }
    })
}

/// An error: `{"detail": <text>}`.
#[derive(Serialize, ToSchema)]
pub struct Detail {
    pub detail: String,
}

/// Invalid input (422), FastAPI's shape.
#[derive(Serialize, ToSchema)]
pub struct Invalid {
    pub detail: Vec<InvalidItem>,
}

#[derive(Serialize, ToSchema)]
pub struct InvalidItem {
    /// `missing`, `int_parsing`, `string_too_long`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Where: `["body", "title"]`, `["path", "session_id"]`, `["query", "limit"]`.
    pub loc: Vec<String>,
    pub msg: String,
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
}

/// A session (`docs/web-api.md` §1), members in this order.
#[derive(Serialize, ToSchema)]
pub struct Session {
    pub session_id: String,
    pub title: String,
    /// RFC 3339 UTC: the modification time of `context.jsonl`.
    pub last_updated: String,
    pub is_running: bool,
    /// `null` when the server hosts nothing for the id.
    pub status: Option<SessionStatus>,
    pub work_dir: String,
    pub session_dir: String,
    pub archived: bool,
}

/// SessionStatus (`docs/web.md` §3.1), also sent on the session socket as `session_status`.
#[derive(Serialize, ToSchema)]
pub struct SessionStatus {
    pub session_id: String,
    pub state: SessionState,
    /// Strictly increasing per session.
    pub seq: u64,
    pub worker_id: Option<String>,
    pub reason: Option<String>,
    pub detail: Option<String>,
    pub updated_at: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Stopped,
    Idle,
    Busy,
    Restarting,
    Error,
}

#[derive(Serialize, ToSchema)]
pub struct CreateSession {
    /// `~` expanded, relative to the server's start dir; none or empty → the home dir.
    pub work_dir: Option<String>,
    pub create_dir: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct UpdateSession {
    #[schema(min_length = 1, max_length = 200)]
    pub title: Option<String>,
    pub archived: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct ForkRequest {
    /// The last turn the fork keeps (0-based).
    pub turn_index: u64,
}

#[derive(Serialize, ToSchema)]
pub struct TitleRequest {
    pub user_message: Option<String>,
    pub assistant_response: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct TitleAnswer {
    pub title: String,
}

/// `POST /api/sessions/{session_id}/files`'s form.
#[derive(Serialize, ToSchema)]
pub struct UploadForm {
    /// The file (more than 100 MiB → 413).
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// A stored upload.
#[derive(Serialize, ToSchema)]
pub struct Uploaded {
    /// Absolute.
    pub path: String,
    /// The stored name.
    pub filename: String,
    pub size: u64,
}

/// One entry of a folder listing (`X-Kiwi-Entry: directory`).
#[derive(Serialize, ToSchema)]
pub struct Entry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EntryKind,
    /// Files only.
    pub size: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Directory,
    File,
}

/// *(kiwi)* `GET /api/sessions/{id}/kiwi-marks` (`docs/web-ui.md`): what kiwi's UI shows after a
/// reload — answered approvals and stopped turns (`session::wire_read::Marks`).
#[derive(Serialize, ToSchema)]
pub struct KiwiMarks {
    pub approvals: Vec<KiwiApprovalMark>,
    /// Indexes of the turns that were stopped.
    pub stopped: Vec<u64>,
}

#[derive(Serialize, ToSchema)]
pub struct KiwiApprovalMark {
    /// The turn's index (the number of `TurnBegin` records before it).
    pub turn_index: u64,
    pub tool_call_id: String,
    /// `approve`, `approve_for_session` or `reject`.
    pub response: String,
    pub feedback: String,
}

/// `docs/web-api.md` §3.3; every member always present.
#[derive(Serialize, ToSchema)]
pub struct GitDiffStats {
    pub is_git_repo: bool,
    pub has_changes: bool,
    pub total_additions: u64,
    pub total_deletions: u64,
    pub files: Vec<GitFileDiff>,
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct GitFileDiff {
    pub path: String,
    pub additions: u64,
    pub deletions: u64,
    /// `added`, `deleted` or `modified`.
    pub status: String,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigView {
    pub default_model: Option<String>,
    pub default_thinking: bool,
    pub models: Vec<ConfigModel>,
    /// kiwi: the sandbox sessions get.
    pub sandbox: SandboxView,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigModel {
    pub provider: String,
    pub model: String,
    pub max_context_size: u64,
    pub capabilities: Option<Vec<String>>,
    pub display_name: Option<String>,
    pub name: String,
    pub provider_type: String,
}

#[derive(Serialize, ToSchema)]
pub struct SandboxView {
    pub mode: String,
    pub network: bool,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigPatch {
    pub default_model: Option<String>,
    pub default_thinking: Option<bool>,
    /// Default true.
    pub restart_running_sessions: Option<bool>,
    /// Default false.
    pub force_restart_busy_sessions: Option<bool>,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigPatched {
    pub config: ConfigView,
    pub restarted_session_ids: Option<Vec<String>>,
    pub skipped_busy_session_ids: Option<Vec<String>>,
}

/// The config file's text, secrets redacted.
#[derive(Serialize, ToSchema)]
pub struct ConfigToml {
    pub content: String,
    pub path: String,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigTomlWrite {
    pub content: String,
}

#[derive(Serialize, ToSchema)]
pub struct ConfigTomlWritten {
    pub success: bool,
    pub error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct OpenIn {
    pub app: OpenInApp,
    pub path: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpenInApp {
    Finder,
    Cursor,
    Vscode,
    Iterm,
    Terminal,
    Antigravity,
}

#[derive(Serialize, ToSchema)]
pub struct OpenInAnswer {
    pub ok: bool,
    pub detail: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
}
