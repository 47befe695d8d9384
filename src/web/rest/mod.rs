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
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter};
use utoipa::openapi::path::{HttpMethod, Paths};

use super::state::AppState;

/// Every REST route.
pub fn routes() -> Routes {
    Routes::default()
        .merge(sessions::routes())
        .merge(files::routes())
        .merge(git::routes())
        .merge(marks::routes())
        .merge(work_dirs::routes())
        .merge(config::routes())
        .merge(open_in::routes())
}

/// Routes being put together with their documentation (`GET /openapi.json`, `docs/web.md` §7):
/// an operation's path and methods are read from its handler's `#[utoipa::path]` annotation and
/// the route is made from them, so a route cannot be served undocumented or documented
/// differently from how it is served. The only other kind is an alias: another path for a
/// documented operation (the slash-less roots).
#[derive(Default)]
pub struct Routes {
    router: Router<AppState>,
    paths: Paths,
    served: Vec<Served>,
}

/// One path as the router serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// axum's form (`{*path}` for a rest-of-path parameter).
    pub route: String,
    /// Lower-case, as OpenAPI names them (`get`, `patch`, …).
    pub methods: Vec<&'static str>,
    /// The documented path it is another name of.
    pub alias_of: Option<&'static str>,
}

impl Routes {
    /// The operation `P` (a handler's `#[utoipa::path]`) served by `handler`.
    pub fn op<P: utoipa::Path, H: Handler<T, AppState>, T: 'static>(self, handler: H) -> Self {
        self.op_with::<P, H, T>(handler, |methods| methods)
    }

    /// [`Self::op`], its method router passed through `adjust` (a layer of its own).
    pub fn op_with<P: utoipa::Path, H: Handler<T, AppState>, T: 'static>(
        mut self,
        handler: H,
        adjust: impl FnOnce(MethodRouter<AppState>) -> MethodRouter<AppState>,
    ) -> Self {
        let (path, methods) = (P::path(), P::methods());
        let route = axum_route(&path);
        let filter = methods.iter().map(filter).reduce(MethodFilter::or).unwrap_or(MethodFilter::GET);
        self.router = self.router.route(&route, adjust(axum::routing::on(filter, handler)));
        let names = methods.iter().map(name).collect();
        self.paths.add_path_operation(&path, methods, P::operation());
        self.served.push(Served { route, methods: names, alias_of: None });
        self
    }

    /// `route` serves what the documented path `of` serves (`methods`, by `router`).
    pub fn alias(mut self, route: &str, of: &'static str, router: MethodRouter<AppState>) -> Self {
        let methods = self.paths.paths.get(of).map(methods_of).unwrap_or_default();
        self.router = self.router.route(route, router);
        self.served.push(Served { route: route.to_string(), methods, alias_of: Some(of) });
        self
    }

    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        for (path, item) in other.paths.paths {
            match self.paths.paths.get_mut(&path) {
                Some(existing) => existing.merge_operations(item),
                None => {
                    self.paths.paths.insert(path, item);
                }
            }
        }
        self.served.extend(other.served);
        self
    }

    /// What the router serves, path by path.
    pub fn served(&self) -> &[Served] {
        &self.served
    }

    /// The router, and the documented paths.
    pub fn split(self) -> (Router<AppState>, Paths) {
        (self.router, self.paths)
    }
}

/// The documented path as axum routes it: a last parameter named as a rest of the path
/// ([`REST_OF_PATH`], documented as one that may hold `/`) is `{*path}`.
fn axum_route(path: &str) -> String {
    match path.rsplit_once("/{") {
        Some((head, last)) if REST_OF_PATH.contains(&last.trim_end_matches('}')) => format!("{head}/{{*{last}"),
        _ => path.to_string(),
    }
}

/// The names of rest-of-path parameters (a file's path below a folder).
const REST_OF_PATH: &[&str] = &["path"];

fn filter(method: &HttpMethod) -> MethodFilter {
    match method {
        HttpMethod::Get => MethodFilter::GET,
        HttpMethod::Post => MethodFilter::POST,
        HttpMethod::Put => MethodFilter::PUT,
        HttpMethod::Delete => MethodFilter::DELETE,
        HttpMethod::Options => MethodFilter::OPTIONS,
        HttpMethod::Head => MethodFilter::HEAD,
        HttpMethod::Patch => MethodFilter::PATCH,
        HttpMethod::Trace => MethodFilter::TRACE,
    }
}

fn name(method: &HttpMethod) -> &'static str {
    match method {
        HttpMethod::Get => "get",
        HttpMethod::Post => "post",
        HttpMethod::Put => "put",
        HttpMethod::Delete => "delete",
        HttpMethod::Options => "options",
        HttpMethod::Head => "head",
        HttpMethod::Patch => "patch",
        HttpMethod::Trace => "trace",
    }
}

/// The methods a documented path has operations for.
pub fn methods_of(item: &utoipa::openapi::path::PathItem) -> Vec<&'static str> {
    let all = [
        (HttpMethod::Get, item.get.is_some()),
        (HttpMethod::Put, item.put.is_some()),
        (HttpMethod::Post, item.post.is_some()),
        (HttpMethod::Delete, item.delete.is_some()),
        (HttpMethod::Options, item.options.is_some()),
        (HttpMethod::Head, item.head.is_some()),
        (HttpMethod::Patch, item.patch.is_some()),
        (HttpMethod::Trace, item.trace.is_some()),
    ];
    all.into_iter().filter(|(_, on)| *on).map(|(m, _)| name(&m)).collect()
}

/// Called once at start-up, before the server accepts connections: installs the upload delivery
/// of the hosted sessions.
pub fn install(state: &AppState) {
    state.set_upload_hook(Arc::new(uploads_hook::Deliver { share: state.share_dir().to_path_buf() }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_path_parameter_is_the_rest_of_the_path() {
        assert_eq!(axum_route("/api/sessions/{session_id}/files/{path}"), "/api/sessions/{session_id}/files/{*path}");
        assert_eq!(axum_route("/api/sessions/{session_id}"), "/api/sessions/{session_id}");
        assert_eq!(axum_route("/api/sessions/{session_id}/files/"), "/api/sessions/{session_id}/files/");
    }
}
