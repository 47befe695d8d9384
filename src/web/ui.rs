//! The browser UI of `kiwi web` (docs/web-ui.md): `index.html` at `/` and its modules, styles and
//! icon under `/assets/<version>/`, all embedded in the binary (no build step: the files under
//! `src/web/ui/` are served as written).
//!
//! Caching (docs/web-ui.md, "Serving and caching"): the page is never cached (`no-cache, no-store,
//! must-revalidate`) and assets are cached for a year as immutable. So that a new kiwi never meets
//! a browser's stale copy, asset URLs carry a digest of all asset bytes (`/assets/3f9a…/app.js`);
//! the page names the current digest, and an asset asked for under any other digest is 404.
//! There is no fallback page: any other path is 404 like the rest of the server.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::errors::ApiError;
use super::state::AppState;

/// One embedded file under `assets/`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";

const ASSETS: &[Asset] = &[
    Asset { name: "app.js", content_type: JS, bytes: include_bytes!("ui/assets/app.js") },
    Asset { name: "api.js", content_type: JS, bytes: include_bytes!("ui/assets/api.js") },
    Asset { name: "blocks.js", content_type: JS, bytes: include_bytes!("ui/assets/blocks.js") },
    Asset { name: "conversation.js", content_type: JS, bytes: include_bytes!("ui/assets/conversation.js") },
    Asset { name: "dom.js", content_type: JS, bytes: include_bytes!("ui/assets/dom.js") },
    Asset { name: "markdown.js", content_type: JS, bytes: include_bytes!("ui/assets/markdown.js") },
    Asset { name: "socket.js", content_type: JS, bytes: include_bytes!("ui/assets/socket.js") },
    Asset { name: "style.css", content_type: "text/css; charset=utf-8", bytes: include_bytes!("ui/assets/style.css") },
    Asset { name: "icon.svg", content_type: "image/svg+xml", bytes: include_bytes!("ui/assets/icon.svg") },
];

const INDEX_TEMPLATE: &str = include_str!("ui/index.html");

/// `Cache-Control` of the page (docs/web-ui.md, "Serving and caching").
pub const PAGE_CACHE: &str = "no-cache, no-store, must-revalidate";
/// `Cache-Control` of the assets (docs/web-ui.md, "Serving and caching").
pub const ASSET_CACHE: &str = "public, max-age=31536000, immutable";

/// The first 16 hex digits of the SHA-256 of every asset's name and bytes: the asset version.
pub fn asset_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut hasher = Sha256::new();
        for asset in ASSETS {
            hasher.update(asset.name.as_bytes());
            hasher.update([0]);
            hasher.update((asset.bytes.len() as u64).to_le_bytes());
            hasher.update(asset.bytes);
        }
        let digest = hasher.finalize();
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    })
}

/// The page with its asset links pointing at this build's assets.
fn index_html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| INDEX_TEMPLATE.replace("{{ASSETS}}", &format!("/assets/{}", asset_version())))
}

/// The UI's routes: `/`, `/index.html` and `/assets/{version}/{name}`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/index.html", get(index)).route("/assets/{version}/{name}", get(asset))
}

/// The page's Content-Security-Policy (`docs/web.md` §5): everything from kiwi's own origin
/// only, images and media also from `data:`/`blob:`, the socket to the server itself; so a
/// prompt-injected answer cannot make the page load anything from elsewhere (issue 30 item 4).
/// `host` is the request's Host header, used only when it is a plain host[:port].
pub fn page_csp(host: Option<&str>) -> String {
    let socket = host
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)))
        .map(|h| format!(" ws://{h} wss://{h}"))
        .unwrap_or_default();
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; \
         media-src 'self' data: blob:; connect-src 'self'{socket}; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

async fn index(headers: HeaderMap) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let csp = HeaderValue::from_str(&page_csp(host)).unwrap_or_else(|_| HeaderValue::from_static("default-src 'self'"));
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static(PAGE_CACHE)),
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
        index_html(),
    )
        .into_response()
}

async fn asset(Path((version, name)): Path<(String, String)>) -> Response {
    let found = ASSETS.iter().find(|a| a.name == name);
    match found {
        Some(a) if version == asset_version() => (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(a.content_type)),
                (header::CACHE_CONTROL, HeaderValue::from_static(ASSET_CACHE)),
            ],
            a.bytes,
        )
            .into_response(),
        // The server's own 404 (docs/web-ui.md, "Serving and caching").
        _ => ApiError::no_route().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_the_page_and_modules_name_is_embedded() {
        let page = index_html();
        let prefix = format!("/assets/{}/", asset_version());
        for link in page.split(prefix.as_str()).skip(1) {
            let name = link.split('"').next().unwrap_or_default();
            assert!(ASSETS.iter().any(|a| a.name == name), "index.html names {name}, which is not embedded");
        }
        assert!(!page.contains("{{ASSETS}}"));
        // Relative module imports (`from "./x.js"`) resolve inside the same versioned folder.
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(asset.bytes).unwrap();
            for import in text.split("from \"./").skip(1) {
                let name = import.split('"').next().unwrap_or_default();
                assert!(ASSETS.iter().any(|a| a.name == name), "{} imports {name}, which is not embedded", asset.name);
            }
        }
    }

    #[test]
    fn the_page_policy_allows_only_its_own_origin() {
        let csp = page_csp(Some("127.0.0.1:5494"));
        assert!(csp.starts_with("default-src 'self'; script-src 'self';"), "{csp}");
        assert!(csp.contains("img-src 'self' data: blob:;") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(csp.contains("connect-src 'self' ws://127.0.0.1:5494 wss://127.0.0.1:5494;"), "{csp}");
        assert!(page_csp(Some("evil; script-src *")).contains("connect-src 'self';"));
        assert!(!page_csp(None).contains("ws://"));
    }

    #[test]
    fn the_version_is_a_stable_hex_digest() {
        let v = asset_version();
        assert_eq!(v.len(), 16);
        assert!(v.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(v, asset_version());
    }
}
