//! Session endpoints (`docs/web-api.md` §2): list across work dirs, create in a work dir, get,
//! rename/archive, delete, and the ZIP download.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use super::super::errors::ApiError;
use super::super::openapi::{CreateSession, Detail, ForkRequest, Invalid, Session, UpdateSession};
use super::super::state::AppState;
use super::Routes;
use super::common::{self, Live, blocking, local_and_unshared, not_busy, session, session_json};
use crate::live::OpError;
use crate::session::catalog;

/// The listing archives old sessions at most this often.
const AUTO_ARCHIVE_EVERY: Duration = Duration::from_secs(300);
static LAST_AUTO_ARCHIVE: Mutex<Option<Instant>> = Mutex::new(None);

pub fn routes() -> Routes {
    Routes::default()
        .op::<__path_list, _, _>(list)
        .op::<__path_create, _, _>(create)
        .alias("/api/sessions", "/api/sessions/", get(list).post(create))
        .op::<__path_get_one, _, _>(get_one)
        .op::<__path_update, _, _>(update)
        .op::<__path_remove, _, _>(remove)
        .op::<__path_export, _, _>(export)
        .op::<__path_fork, _, _>(fork)
        .op::<super::title::__path_generate, _, _>(super::title::generate)
}

fn json(value: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

#[utoipa::path(get, path = "/api/sessions/", tag = "sessions", operation_id = "list_sessions",
    params(
        ("limit" = Option<i64>, Query, description = "At most this many (100; ≤0 → 100, >500 → 500)."),
        ("offset" = Option<i64>, Query, description = "Skip this many (0; <0 → 0)."),
        ("q" = Option<String>, Query, description = "Keep sessions whose title or work dir contains it (case-insensitive)."),
        ("archived" = Option<bool>, Query, description = "true: only archived sessions; otherwise only the others."),
        ("kiwi_origin" = Option<String>, Query, description = "*(kiwi)* Present: each session gains `kiwi_origin` (`\"print\"` for a print run's session, else null)."),
    ),
    responses((status = 200, description = "Sessions, most recently updated first.", body = Vec<Session>), (status = 401, description = "Missing or wrong token.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `GET /api/sessions/`.
async fn list(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let limit = common::int_query(query.get("limit"), "limit")?;
    let offset = common::int_query(query.get("offset"), "offset")?;
    let archived = match query.get("archived") {
        None => false,
        Some(v) => common::bool_field(Some(&Value::String(v.clone())), &["query", "archived"])?.unwrap_or(false),
    };
    let q = catalog::Query { limit, offset, q: query.get("q").cloned(), archived };
    // kiwi extension (`docs/web-ui.md`): asked for, each session says which run made it.
    let asked_origin = query.contains_key("kiwi_origin");
    let share = state.share_dir().to_path_buf();
    let page = blocking(move || {
        let mut all = catalog::list_all(&share);
        let due = {
            let mut last = LAST_AUTO_ARCHIVE.lock().unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|at| at.elapsed() >= AUTO_ARCHIVE_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            catalog::auto_archive(&mut all, SystemTime::now());
        }
        let page = catalog::select(all, &q);
        let origins: Vec<_> = page.iter().map(|s| asked_origin.then(|| origin_member(&s.session_dir))).collect();
        (page, origins)
    })
    .await?;
    let (page, origins) = page;
    let listed = page.iter().zip(origins).map(|(s, origin)| {
        let mut value = session_json(&state, s, Live::Hosted);
        if let (Some(origin), Value::Object(members)) = (origin, &mut value) {
            members.insert("kiwi_origin".into(), origin);
        }
        value
    });
    Ok(json(Value::Array(listed.collect())))
}

/// `kiwi_origin`: `"print"` for a session a print run created (`session::origin`), else null.
fn origin_member(dir: &std::path::Path) -> Value {
    match crate::session::origin::read(dir) {
        Some(origin) if origin.is_print() => Value::from("print"),
        _ => Value::Null,
    }
}

#[utoipa::path(post, path = "/api/sessions/", tag = "sessions",
    request_body(content = Option<CreateSession>, content_type = "application/json"),
    responses(
        (status = 200, description = "The new session (`stopped`, seq 0); no agent is started.", body = Session),
        (status = 400, description = "Path is not a directory / Failed to create directory.", body = Detail),
        (status = 403, description = "Permission denied: cannot create directory.", body = Detail),
        (status = 404, description = "Directory does not exist.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `POST /api/sessions/`.
async fn create(State(state): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body: Value = common::optional_body(&bytes)?;
    let work_dir = common::string_field(body.get("work_dir"), &["body", "work_dir"])?;
    let create_dir = common::bool_field(body.get("create_dir"), &["body", "create_dir"])?.unwrap_or(false);
    let share = state.share_dir().to_path_buf();
    let cwd = state.settings.startup_dir.clone();
    let info = blocking(move || {
        let dir = catalog::resolve_new_work_dir(work_dir.as_deref(), create_dir, &cwd).map_err(|e| match &e {
            catalog::WorkDirError::Missing(d) => ApiError::not_found(d.clone()),
            catalog::WorkDirError::PermissionDenied(d) => ApiError::forbidden(d.clone()),
            catalog::WorkDirError::Invalid(d) => ApiError::bad_request(d.clone()),
        })?;
        catalog::create(&share, &dir).map_err(|e| ApiError::internal(format!("Failed to create session: {e}")))
    })
    .await??;
    Ok(json(session_json(&state, &info, Live::Stopped)))
}

#[utoipa::path(get, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    responses((status = 200, description = "The session, or `null` when there is none.", body = Option<Session>), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `GET /api/sessions/{id}`: the Session, or `null` when there is none.
async fn get_one(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match session(&state, &id).await {
        Ok(info) => Ok(json(session_json(&state, &info, Live::Hosted))),
        Err(e) if e.status.as_u16() == 404 => Ok(json(Value::Null)),
        Err(e) => Err(e),
    }
}

#[utoipa::path(patch, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    request_body(content = UpdateSession, content_type = "application/json"),
    responses((status = 200, description = "The session (`is_running: false`, `status: null`).", body = Session),
        (status = 400, description = "Session is busy. Please wait for it to complete before modifying.", body = Detail), (status = 409, description = "Archiving (`archived` given): Session is hosted by another process / Session has clients in other processes (kiwi, `docs/web.md` §3.6).", body = Detail), (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `PATCH /api/sessions/{id}`: rename and/or archive.
async fn update(State(state): State<AppState>, Path(id): Path<String>, bytes: Bytes) -> Result<Response, ApiError> {
    common::check_id(&id)?;
    let body: Value = common::optional_body(&bytes)?;
    let title = common::string_field(body.get("title"), &["body", "title"])?;
    if let Some(t) = &title {
        let n = t.chars().count();
        if n < 1 {
            return Err(ApiError::validation(
                "string_too_short",
                &["body", "title"],
                "String should have at least 1 character",
                Value::String(t.clone()),
            ));
        }
        if n > 200 {
            return Err(ApiError::validation(
                "string_too_long",
                &["body", "title"],
                "String should have at most 200 characters",
                Value::String(t.clone()),
            ));
        }
    }
    let archived = common::bool_field(body.get("archived"), &["body", "archived"])?;
    let info = session(&state, &id).await?;
    if archived.is_some() {
        local_and_unshared(&state, &info.id).await?;
    }
    not_busy(&state, &info.id)?;
    let share = state.share_dir().to_path_buf();
    let change = catalog::Update { title, archived };
    let dir = info.session_dir.clone();
    let sid = info.id.clone();
    let info = blocking(move || {
        catalog::apply_update(&dir, &change, SystemTime::now())?;
        Ok::<_, std::io::Error>(catalog::find(&share, &sid))
    })
    .await?
    .map_err(|e| ApiError::internal(format!("Failed to update session: {e}")))?
    .ok_or_else(ApiError::session_not_found)?;
    Ok(json(session_json(&state, &info, Live::Null)))
}

#[utoipa::path(delete, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    responses((status = 200, description = "Deleted: `null`. The session's sockets hear `stopped` and close.", body = Option<Detail>),
        (status = 400, description = "Session is busy. Please wait for it to complete before modifying.", body = Detail), (status = 409, description = "Session is hosted by another process / Session has clients in other processes (kiwi, `docs/web.md` §3.6).", body = Detail), (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `DELETE /api/sessions/{id}`.
async fn remove(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    local_and_unshared(&state, &info.id).await?;
    // A turn that waits for an answer from a client that left does not pin the session: the
    // stop cancels it (`docs/web-api.md` §2).
    if !state.hosting.is_abandoned(&info.id) {
        not_busy(&state, &info.id)?;
    }
    state.stop_session(&info.id).await;
    let share = state.share_dir().to_path_buf();
    let sid = info.id.clone();
    let deleted = blocking(move || catalog::delete(&share, &info)).await?;
    if let Err(e) = deleted {
        state.hosting.undelete(&sid);
        return Err(ApiError::internal(format!("Failed to delete session: {e}")));
    }
    Ok(json(Value::Null))
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/export", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    responses((status = 200, description = "The session as a ZIP, as `kiwi export` writes it (kiwi).", content_type = "application/zip", body = String),
        (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `GET /api/sessions/{id}/export`: the session as `kiwi export` writes it (`application/zip`).
async fn export(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    let share = state.share_dir().to_path_buf();
    let dir = info.session_dir.clone();
    let file = blocking(move || -> std::io::Result<std::fs::File> {
        let logs = crate::session::export::recent_logs(&share, &dir, SystemTime::now());
        let path = std::env::temp_dir().join(format!("kiwi-export-{}.zip", uuid::Uuid::new_v4().simple()));
        let written = crate::session::export::export_to(&dir, &logs, &path);
        let file = written.and_then(|_| std::fs::File::open(&path));
        // Unlinked at once: the open file stays readable and nothing is left behind.
        let _ = std::fs::remove_file(&path);
        file
    })
    .await?
    .map_err(|e| ApiError::internal(format!("Failed to export session: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    let name = format!("session-{}.zip", info.id);
    Ok((
        [
            (header::CONTENT_TYPE, "application/zip".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::CONTENT_DISPOSITION, crate::session::workspace::content_disposition("attachment", &name)),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/fork", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    request_body(content = ForkRequest, content_type = "application/json"),
    responses((status = 200, description = "The new session, titled `Fork: <title>` (`stopped`).", body = Session),
        (status = 400, description = "Busy, no `wire.jsonl`, or the turn is past the last one.", body = Detail),
        (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `POST /api/sessions/{id}/fork` (`docs/web-api.md`): a new session of the same work dir
/// holding turns 0..=`turn_index` (`session::fork`).
async fn fork(State(state): State<AppState>, Path(id): Path<String>, bytes: Bytes) -> Result<Response, ApiError> {
    common::check_id(&id)?;
    let body: Value = common::body(&bytes)?;
    let turn = match body.get("turn_index") {
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or_default(),
        Some(Value::Number(n)) if n.as_i64().is_some() => {
            return Err(ApiError::validation(
                "greater_than_equal",
                &["body", "turn_index"],
                "Input should be greater than or equal to 0",
                Value::Number(n.clone()),
            ));
        }
        Some(other) => {
            return Err(ApiError::validation(
                "int_parsing",
                &["body", "turn_index"],
                "Input should be a valid integer",
                other.clone(),
            ));
        }
        None => return Err(ApiError::validation("missing", &["body", "turn_index"], "Field required", body.clone())),
    };
    let info = session(&state, &id).await?;
    let share = state.share_dir().to_path_buf();
    // Open here: the live session's operation (its busy rule, its record flushed first).
    let forked = match state.hosting.get(&info.id).and_then(|h| h.live()) {
        Some(live) => live.fork(Some(turn)).await,
        None => {
            not_busy(&state, &info.id)?;
            let (work_dir, source) = (std::path::PathBuf::from(&info.work_dir), info.session_dir.clone());
            blocking(move || crate::session::fork::fork(&share, &work_dir, &source, Some(turn))).await?.map_err(|e| {
                match e {
                    crate::session::fork::ForkError::Io(e) => OpError::Failed(e),
                    e => OpError::Invalid(e.to_string()),
                }
            })
        }
    };
    let forked = forked.map_err(|e| match e {
        OpError::Busy => ApiError::busy(),
        OpError::Invalid(e) => ApiError::bad_request(e),
        OpError::Failed(e) => ApiError::internal(format!("Failed to fork session: {e}")),
    })?;
    let share = state.share_dir().to_path_buf();
    match blocking(move || catalog::find(&share, &forked.id)).await? {
        Some(info) => Ok(json(session_json(&state, &info, Live::Stopped))),
        None => Err(ApiError::internal("Failed to fork session: the new session cannot be read")),
    }
}
