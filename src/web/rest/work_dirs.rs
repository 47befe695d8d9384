//! Work-dir suggestions for a new session (`docs/web-api.md` §4): the known ones, and the
//! server's own working directory.

use axum::extract::State;
use axum::routing::get;

use super::super::errors::ApiError;
use super::super::state::AppState;
use super::Routes;
use super::common::blocking;

pub fn routes() -> Routes {
    Routes::default()
        .op::<__path_list, _, _>(list)
        .alias("/api/work-dirs", "/api/work-dirs/", get(list))
        .op::<__path_startup, _, _>(startup)
}

/// `GET /api/work-dirs/`.
#[utoipa::path(get, path = "/api/work-dirs/", tag = "work-dirs", operation_id = "list_work_dirs",
    responses((status = 200, description = "The known work dirs that exist (at most 20).", body = Vec<String>)))]
async fn list(State(state): State<AppState>) -> Result<axum::Json<Vec<String>>, ApiError> {
    let share = state.share_dir().to_path_buf();
    Ok(axum::Json(blocking(move || crate::session::catalog::work_dirs(&share)).await?))
}

/// `GET /api/work-dirs/startup`.
#[utoipa::path(get, path = "/api/work-dirs/startup", tag = "work-dirs",
    responses((status = 200, description = "The server's working directory at start.", content_type = "application/json", body = String)))]
async fn startup(State(state): State<AppState>) -> axum::Json<String> {
    axum::Json(state.settings.startup_dir.to_string_lossy().to_string())
}
