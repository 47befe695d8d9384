//! The REST API of `kiwi web` (`docs/web-api.md`): sessions, files and uploads, git diff
//! stats, work dirs, config and open-in, one module per group. Its routes are merged into the
//! application by `web::router`; a route naming a session calls its path parameter `session_id`.

mod common;
mod config;
mod files;
mod git;
mod marks;
mod open_in;
mod sessions;
mod title;
mod uploads_hook;
mod work_dirs;

use std::sync::Arc;

use axum::Router;

use super::state::AppState;

/// Every REST route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(sessions::routes())
        .merge(files::routes())
        .merge(git::routes())
        .merge(marks::routes())
        .merge(work_dirs::routes())
        .merge(config::routes())
        .merge(open_in::routes())
}

/// Called once at start-up, before the server accepts connections: installs the upload delivery
/// of the hosted sessions.
pub fn install(state: &AppState) {
    state.set_upload_hook(Arc::new(uploads_hook::Deliver { share: state.share_dir().to_path_buf() }));
}
