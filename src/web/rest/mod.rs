//! The REST API of `kiwi web` (`docs/web.md` §3, §5-§7): sessions, files and uploads, git diff
//! stats, work dirs and config. Its routes are merged into the application by `web::router`;
//! a route naming a session calls its path parameter `session_id`.

use axum::Router;

use super::state::AppState;

/// Every REST route.
pub fn routes() -> Router<AppState> {
    Router::new()
}

/// Called once at start-up, before the server accepts connections: the place to install what
/// the hosted sessions need from the REST layer (e.g. [`AppState::set_upload_hook`]).
pub fn install(_state: &AppState) {}
