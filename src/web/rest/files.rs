//! Files of a session (`docs/web-api.md` §3): uploads into `<session>/uploads/` (size bounded
//! while streaming), their download, and the work dir's files and folders (confined to the work
//! dir after resolving symlinks; restricted mode's extra refusals).

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use super::super::errors::ApiError;
use super::super::openapi::{Detail, Entry, Invalid, UploadForm, Uploaded};
use super::super::state::AppState;
use super::Routes;
use super::common::{blocking, not_busy, session};
use crate::session::workspace::{self, MAX_UPLOAD_BYTES};

const TOO_LARGE: &str = "File too large (max 100MB)";
const FILE_NOT_FOUND: &str = "File not found";

pub fn routes() -> Routes {
    Routes::default()
        // The stream is bounded by the handler itself (413 past 100 MiB, counted as it is read);
        // this only keeps a multipart envelope from going on forever.
        .op_with::<__path_upload, _, _>(upload, |methods| {
            methods.layer(DefaultBodyLimit::max(usize::try_from(MAX_UPLOAD_BYTES).unwrap_or(usize::MAX) + (1 << 20)))
        })
        .op::<__path_work_root, _, _>(work_root)
        .op::<__path_work_file, _, _>(work_file)
        .op::<__path_upload_file, _, _>(upload_file)
}

fn too_large() -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE)
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/files", tag = "files", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    request_body(content = inline(UploadForm), content_type = "multipart/form-data"),
    responses((status = 200, description = "Stored in `<session dir>/uploads/`; sent with the next prompt.", body = Uploaded),
        (status = 400, description = "Session is busy. Please wait for it to complete before modifying.", body = Detail), (status = 404, description = "Session not found.", body = Detail), (status = 413, description = "File too large (max 100MB).", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `POST /api/sessions/{id}/files` (multipart, field `file`).
async fn upload(
    state: State<AppState>,
    id: Path<String>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    match receive(state, id, multipart).await {
        Ok(stored) => stored,
        Err(refused) => {
            // A refusal leaves the rest of the body unread, so the connection closes after the
            // answer; saying so keeps a client from sending its next request down it.
            let mut response = refused.into_response();
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            response
        }
    }
}

async fn receive(
    State(state): State<AppState>,
    Path(id): Path<String>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    not_busy(&state, &info.id)?;
    let mut multipart =
        multipart.map_err(|e| ApiError::validation("missing", &["body", "file"], e.body_text(), Value::Null))?;
    let uploads = info.session_dir.join("uploads");
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(ApiError::validation("value_error", &["body", "file"], e.body_text(), Value::Null)),
        };
        if field.name() != Some("file") {
            continue;
        }
        let name = workspace::upload_name(field.file_name());
        tokio::fs::create_dir_all(&uploads)
            .await
            .map_err(|e| ApiError::internal(format!("Cannot store the upload: {e}")))?;
        let target = uploads.join(&name);
        let partial = uploads.join(format!(".{name}.partial"));
        let written = store(field, &partial).await;
        match written {
            Ok(size) => {
                tokio::fs::rename(&partial, &target)
                    .await
                    .map_err(|e| ApiError::internal(format!("Cannot store the upload: {e}")))?;
                return Ok(axum::Json(json!({"path": target.to_string_lossy(), "filename": name, "size": size}))
                    .into_response());
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(&partial).await;
                return Err(e);
            }
        }
    }
    Err(ApiError::validation("missing", &["body", "file"], "Field required", Value::Null))
}

/// What the file API says of a path that is neither a regular file nor a folder.
const NOT_REGULAR: &str = "Not a regular file or directory";

/// Streams one field into `path`, refusing it once it passes the limit.
async fn store(mut field: axum::extract::multipart::Field<'_>, path: &std::path::Path) -> Result<u64, ApiError> {
    let mut file =
        tokio::fs::File::create(path).await.map_err(|e| ApiError::internal(format!("Cannot store the upload: {e}")))?;
    let mut size: u64 = 0;
    loop {
        match field.chunk().await {
            Ok(Some(chunk)) => {
                size += chunk.len() as u64;
                if size > MAX_UPLOAD_BYTES {
                    return Err(too_large());
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| ApiError::internal(format!("Cannot store the upload: {e}")))?;
            }
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(ApiError::validation("value_error", &["body", "file"], e.body_text(), Value::Null)),
        }
    }
    file.flush().await.map_err(|e| ApiError::internal(format!("Cannot store the upload: {e}")))?;
    Ok(size)
}

/// The policy of user content (uploads, work-dir files): whatever it is, it runs no script and
/// loads nothing, in a sandbox of its own origin, so an uploaded page or SVG opened from the UI
/// cannot reach the token kept in kiwi's origin (issue 30 item 3).
pub const USER_CONTENT_CSP: &str =
    "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'";

/// Media a browser only displays (plain text included: `nosniff` keeps it text): served inline;
/// everything else (HTML, SVG, scripts, PDF…) is an attachment.
fn passive_media(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    matches!(
        essence,
        "text/plain" | "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "image/avif" | "image/bmp"
    ) || essence.starts_with("audio/")
        || essence.starts_with("video/")
}

/// Streams a file with its type and disposition (`inline` only for passive media), with
/// `nosniff` and [`USER_CONTENT_CSP`].
async fn send_file(path: &std::path::Path, disposition: &str, entry_header: bool) -> Result<Response, ApiError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // Non-blocking open: a FIFO swapped in after the checks does not hang the request.
    let mut open = std::fs::OpenOptions::new();
    open.read(true).custom_flags(libc::O_NONBLOCK);
    let file = tokio::fs::OpenOptions::from(open).open(path).await.map_err(|_| ApiError::not_found(FILE_NOT_FOUND))?;
    let meta = file.metadata().await.map_err(|_| ApiError::not_found(FILE_NOT_FOUND))?;
    if !meta.is_file() {
        return Err(ApiError::bad_request(NOT_REGULAR));
    }
    let len = meta.len();
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let content_type = workspace::content_type(&name);
    let disposition = if passive_media(&content_type) { disposition } else { "attachment" };
    let mut response = (
        [
            (header::CONTENT_DISPOSITION, workspace::content_disposition(disposition, &name)),
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::CONTENT_SECURITY_POLICY, USER_CONTENT_CSP.to_string()),
        ],
        Body::from_stream(tokio_util::io::ReaderStream::new(file)),
    )
        .into_response();
    if entry_header {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-kiwi-entry"), "file".parse().map_err(|_| ApiError::internal("header"))?);
    }
    Ok(response)
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/uploads/{path}", tag = "files",
    params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422)."), ("path" = String, Path, description = "The upload's path below the uploads folder (may hold `/`).")),
    responses((status = 200, description = "The upload's bytes, `inline` for passive media, else `attachment`.", content_type = "application/octet-stream", body = String),
        (status = 400, description = "Invalid path: path traversal not allowed.", body = Detail),
        (status = 404, description = "Session / Uploads directory / File not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `GET /api/sessions/{id}/uploads/{path}`.
async fn upload_file(
    State(state): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    let uploads = info.session_dir.join("uploads");
    if !uploads.is_dir() {
        return Err(ApiError::not_found("Uploads directory not found"));
    }
    let target = blocking(move || workspace::confine(&uploads, &path)).await?.map_err(ApiError::bad_request)?;
    if !target.is_file() {
        return Err(ApiError::not_found(FILE_NOT_FOUND));
    }
    send_file(&target, "inline", false).await
}

/// `GET /api/sessions/{id}/files/`: the work dir's listing.
#[utoipa::path(get, path = "/api/sessions/{session_id}/files/", tag = "files", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    responses((status = 200, description = "The work dir's entries, folders first (`X-Kiwi-Entry: directory`).", body = Vec<Entry>),
        (status = 403, description = "Restricted mode's refusals.", body = Detail), (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
async fn work_root(state: State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    work_path(state, id, String::new()).await
}

/// `GET /api/sessions/{id}/files/{path}`.
#[utoipa::path(get, path = "/api/sessions/{session_id}/files/{path}", tag = "files",
    params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422)."), ("path" = String, Path, description = "Below the work dir (may hold `/`, or be sent as `%2F`).")),
    responses((status = 200, description = "A folder's entries (`X-Kiwi-Entry: directory`) or a file's bytes as an attachment (`X-Kiwi-Entry: file`).",
            content((Vec<Entry> = "application/json"), (String = "application/octet-stream"))),
        (status = 400, description = "Invalid path: path traversal not allowed.", body = Detail),
        (status = 403, description = "Restricted mode's refusals.", body = Detail),
        (status = 404, description = "Session / File not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
async fn work_file(state: State<AppState>, Path((id, path)): Path<(String, String)>) -> Result<Response, ApiError> {
    work_path(state, id, path).await
}

/// `GET /api/sessions/{id}/files/{path}`: a listing for a folder, the bytes for a file.
async fn work_path(State(state): State<AppState>, id: String, path: String) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    let restricted = state.restricted();
    let depth = state.settings.max_public_path_depth;
    let work_dir = std::path::PathBuf::from(&info.work_dir);
    let (target, listing) = blocking(move || -> Result<_, ApiError> {
        let target = workspace::confine(&work_dir, &path).map_err(ApiError::bad_request)?;
        if restricted {
            let home = crate::session::store::home_dir();
            workspace::check_restricted(&work_dir, &path, &target, &home, depth).map_err(ApiError::forbidden)?;
        }
        let Ok(meta) = std::fs::metadata(&target) else { return Err(ApiError::not_found(FILE_NOT_FOUND)) };
        if !meta.is_dir() && !meta.is_file() {
            // A FIFO would block the read for ever; a device or socket is no file to serve.
            return Err(ApiError::bad_request(NOT_REGULAR));
        }
        if meta.is_dir() {
            let entries = workspace::list_dir(&target, restricted).map_err(|_| ApiError::not_found(FILE_NOT_FOUND))?;
            return Ok((target, Some(entries)));
        }
        Ok((target, None))
    })
    .await??;
    match listing {
        Some(entries) => {
            let list: Vec<Value> = entries
                .into_iter()
                .map(|e| {
                    if e.is_dir {
                        json!({"name": e.name, "type": "directory"})
                    } else {
                        json!({"name": e.name, "type": "file", "size": e.size})
                    }
                })
                .collect();
            Ok((
                [(header::CONTENT_TYPE, "application/json"), (HeaderName::from_static("x-kiwi-entry"), "directory")],
                Value::Array(list).to_string(),
            )
                .into_response())
        }
        None => send_file(&target, "attachment", true).await,
    }
}
