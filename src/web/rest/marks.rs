//! `GET /api/sessions/{id}/kiwi-marks` *(kiwi)*: the answered approvals and the stopped turns of
//! a session, read from kiwi's own members of its `wire.jsonl` records (`session::wire_read`),
//! so kiwi's UI shows "Approved" and "Stopped." after a reload and in every tab. A route of its
//! own: the reference's UI never calls it, and no reference answer changes (`docs/web-ui.md`).

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use super::super::errors::ApiError;
use super::super::state::AppState;
use super::common::{blocking, session};
use crate::session::wire_read::{self, Marks};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/sessions/{session_id}/kiwi-marks", get(marks))
}

async fn marks(State(state): State<AppState>, Path(id): Path<String>) -> Result<axum::Json<Marks>, ApiError> {
    let info = session(&state, &id).await?;
    let path = info.session_dir.join("wire.jsonl");
    let marks = blocking(move || wire_read::marks(&path)).await?;
    marks.map(axum::Json).map_err(|e| ApiError::internal(format!("Failed to read the session: {e}")))
}
