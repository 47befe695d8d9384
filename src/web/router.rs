//! The HTTP stack of `kiwi web` (axum on hyper and tokio: typed extractors and handlers, the
//! WebSocket upgrade, multipart, tower layers for CORS and gzip; `docs/web.md` §2): the routes
//! of the REST layer and the UI, `/healthz`, `/openapi.json`, the session WebSocket and
//! `/api/acp`, and around them, outermost first: the CORS preflight check, CORS, gzip for
//! responses of 1 KiB and more, the guards.
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
use super::openapi;
use super::rest::Routes;
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
    let (documented, _) = documented_routes().split();
    Router::new()
        .merge(documented)
        .route(SOCKETS[0], get(super::socket::upgrade))
        .route(SOCKETS[1], get(super::acp_socket::upgrade))
        .merge(super::ui::routes())
        .fallback(not_found)
        .layer(map_response(method_not_allowed_as_json))
        .layer(from_fn_with_state(state.clone(), guard::guard))
        .layer(gzip)
        .layer(cors)
        .layer(from_fn_with_state(state.clone(), guard::preflight))
        .with_state(state)
}

/// The WebSockets, described in `/openapi.json`'s `x-websockets`: a session's stream, ACP.
pub const SOCKETS: [&str; 2] = ["/api/sessions/{session_id}/stream", "/api/acp"];

/// Every route `/openapi.json` documents: the REST API, `/healthz` and the document itself. The
/// others are the WebSockets (described in its `x-websockets`) and the UI's pages and assets.
pub fn documented_routes() -> Routes {
    super::rest::routes().op::<__path_healthz, _, _>(healthz).op::<openapi::__path_serve, _, _>(openapi::serve)
}

/// `GET /healthz`.
#[utoipa::path(get, path = "/healthz", tag = "meta", security(()),
    responses((status = 200, description = "The server is up; no token needed.", body = openapi::Health)))]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the router serves besides the sockets and the UI is documented with the
    /// methods it serves, or is an alias of a documented path with the same methods; every
    /// documented operation is served; every socket is described.
    #[test]
    fn the_document_lists_every_route() {
        let routes = documented_routes();
        let served = routes.served().to_vec();
        let (_, paths) = routes.split();
        let doc = openapi::document(paths);
        let mut documented = std::collections::BTreeSet::new();
        for (path, item) in &doc.paths.paths {
            for method in super::super::rest::methods_of(item) {
                documented.insert((path.clone(), method));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for one in &served {
            let path = match one.alias_of {
                Some(of) => of.to_string(),
                None => one.route.replace("{*", "{"),
            };
            assert!(!one.methods.is_empty(), "{one:?}");
            for method in &one.methods {
                assert!(documented.contains(&(path.clone(), *method)), "{method} {} is not documented", one.route);
                seen.insert((path.clone(), *method));
            }
        }
        assert_eq!(seen, documented, "documented but not served");
        let json = serde_json::to_value(&doc).unwrap();
        let mut sockets: Vec<&str> = json["x-websockets"].as_object().unwrap().keys().map(String::as_str).collect();
        sockets.sort_unstable();
        let mut expected = SOCKETS.to_vec();
        expected.sort_unstable();
        assert_eq!(sockets, expected);
        assert_eq!(json["openapi"], "3.1.0");
    }
}
