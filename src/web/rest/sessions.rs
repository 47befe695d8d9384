//! Session endpoints (`docs/web-api.md` §2): list across work dirs, create in a work dir, get,
//! rename/archive, delete, and the ZIP download.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use super::super::errors::ApiError;
use super::super::state::AppState;
use super::common::{self, Live, blocking, not_busy, session, session_json};
use crate::session::catalog;

/// The listing archives old sessions at most this often.
const AUTO_ARCHIVE_EVERY: Duration = Duration::from_secs(300);
static LAST_AUTO_ARCHIVE: Mutex<Option<Instant>> = Mutex::new(None);

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/sessions/", get(list).post(create))
        .route("/api/sessions", get(list).post(create))
        .route("/api/sessions/{session_id}", get(get_one).patch(update).delete(remove))
        .route("/api/sessions/{session_id}/export", get(export))
        .route("/api/sessions/{session_id}/fork", axum::routing::post(fork))
        .route("/api/sessions/{session_id}/generate-title", axum::routing::post(super::title::generate))
}

fn json(value: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

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

/// `GET /api/sessions/{id}`: the Session, or `null` when there is none.
async fn get_one(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    match session(&state, &id).await {
        Ok(info) => Ok(json(session_json(&state, &info, Live::Hosted))),
        Err(e) if e.status.as_u16() == 404 => Ok(json(Value::Null)),
        Err(e) => Err(e),
    }
}

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

/// `DELETE /api/sessions/{id}`.
async fn remove(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
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
    not_busy(&state, &info.id)?;
    let share = state.share_dir().to_path_buf();
    let (work_dir, source) = (std::path::PathBuf::from(&info.work_dir), info.session_dir.clone());
    let forked = blocking(move || {
        let forked = crate::session::fork::fork(&share, &work_dir, &source, Some(turn))?;
        Ok::<_, crate::session::fork::ForkError>(catalog::find(&share, &forked.id))
    })
    .await?;
    match forked {
        Ok(Some(info)) => Ok(json(session_json(&state, &info, Live::Stopped))),
        Ok(None) => Err(ApiError::internal("Failed to fork session: the new session cannot be read")),
        Err(crate::session::fork::ForkError::Io(e)) => Err(ApiError::internal(format!("Failed to fork session: {e}"))),
        Err(e) => Err(ApiError::bad_request(e.to_string())),
    }
}
