//! The browser UI of `kiwi web`, embedded in the binary and served at `/` (`docs/web.md` §2.3):
//! `/` and `*.html` are never cached.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::state::AppState;

const INDEX: &str = include_str!("ui/index.html");

/// The UI's routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/index.html", get(index))
}

async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache, no-store, must-revalidate"),
        ],
        INDEX,
    )
        .into_response()
}
