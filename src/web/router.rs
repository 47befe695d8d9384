//! The HTTP stack of `kiwi web` (axum on hyper and tokio: typed extractors and handlers, the
//! WebSocket upgrade, multipart, tower layers for CORS and gzip; `docs/web.md` §2): the routes
//! of the REST layer and the UI, `/healthz`, the session WebSocket, and around them, outermost
//! first: the CORS preflight check, CORS, gzip for responses of 1 KiB and more, the guards.
//!
//! Invariants: an unknown path is 404 `{"detail":"Not Found"}` and a known path with the wrong
//! method 405 `{"detail":"Method Not Allowed"}`, whoever's route it is; path parameters that
//! name a session are called `session_id` in every route (axum requires one name per position).

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{from_fn_with_state, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{Predicate as _, SizeAbove};
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};

use super::errors::ApiError;
use super::guard;
use super::state::AppState;

/// The whole application.
pub fn app(state: AppState) -> Router {
    let settings = state.settings.clone();
    let cors = CorsLayer::new()
        .allow_credentials(true)
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .allow_origin(AllowOrigin::predicate(move |origin: &HeaderValue, _| {
            origin.to_str().is_ok_and(|o| settings.origin_allowed(o))
        }));
    let gzip = CompressionLayer::new()
        .gzip(true)
        .compress_when(SizeAbove::new(1024).and(tower_http::compression::predicate::NotForContentType::IMAGES));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/sessions/{session_id}/stream", get(super::socket::upgrade))
        .route("/api/acp", get(super::acp_socket::upgrade))
        .merge(super::rest::routes())
        .merge(super::ui::routes())
        .fallback(not_found)
        .layer(map_response(method_not_allowed_as_json))
        .layer(from_fn_with_state(state.clone(), guard::guard))
        .layer(gzip)
        .layer(cors)
        .layer(from_fn_with_state(state.clone(), guard::preflight))
        .with_state(state)
}

/// `GET /healthz`.
async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], r#"{"status":"ok"}"#).into_response()
}

async fn not_found() -> ApiError {
    ApiError::no_route()
}

/// axum answers a wrong method with an empty 405; clients expect the JSON body.
async fn method_not_allowed_as_json(response: Response) -> Response {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED && !response.headers().contains_key(header::CONTENT_TYPE) {
        let mut json = ApiError::method_not_allowed().into_response();
        if let Some(allow) = response.headers().get(header::ALLOW) {
            json.headers_mut().insert(header::ALLOW, allow.clone());
        }
        return json;
    }
    response
}
