//! `GET /api/sessions/{id}/git-diff` (`docs/web-api.md` §3): the work dir's changes against HEAD.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use super::super::errors::ApiError;
use super::super::state::AppState;
use super::common::session;
use crate::session::git_diff::{self, GitDiffStats};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/sessions/{session_id}/git-diff", get(diff))
}

async fn diff(State(state): State<AppState>, Path(id): Path<String>) -> Result<axum::Json<GitDiffStats>, ApiError> {
    let info = session(&state, &id).await?;
    Ok(axum::Json(git_diff::stats(std::path::Path::new(&info.work_dir)).await))
}
