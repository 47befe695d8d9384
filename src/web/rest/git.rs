//! `GET /api/sessions/{id}/git-diff` (`docs/web-api.md` §3): the work dir's changes against HEAD.

use axum::extract::{Path, State};

use super::super::errors::ApiError;
use super::super::openapi::{Detail, Invalid};
use super::super::state::AppState;
use super::Routes;
use super::common::session;
use crate::session::git_diff::{self, GitDiffStats};

pub fn routes() -> Routes {
    Routes::default().op::<__path_diff, _, _>(diff)
}

/// `GET /api/sessions/{id}/git-diff`.
#[utoipa::path(get, path = "/api/sessions/{session_id}/git-diff", tag = "files", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    responses((status = 200, description = "The work dir's changes against HEAD.", body = super::super::openapi::GitDiffStats),
        (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
async fn diff(State(state): State<AppState>, Path(id): Path<String>) -> Result<axum::Json<GitDiffStats>, ApiError> {
    let info = session(&state, &id).await?;
    Ok(axum::Json(git_diff::stats(std::path::Path::new(&info.work_dir)).await))
}
