//! Work-dir suggestions for a new session (`docs/web-api.md` §4): the known ones, and the
//! server's own working directory.

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use super::super::errors::ApiError;
use super::super::state::AppState;
use super::common::blocking;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/work-dirs/", get(list))
        .route("/api/work-dirs", get(list))
        .route("/api/work-dirs/startup", get(startup))
}

async fn list(State(state): State<AppState>) -> Result<axum::Json<Vec<String>>, ApiError> {
    let share = state.share_dir().to_path_buf();
    Ok(axum::Json(blocking(move || crate::session::catalog::work_dirs(&share)).await?))
}

async fn startup(State(state): State<AppState>) -> axum::Json<String> {
    axum::Json(state.settings.startup_dir.to_string_lossy().to_string())
}
