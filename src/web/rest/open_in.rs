//! `POST /api/open-in` (`docs/web-api.md` §6): open a path in a local app. Only macOS and
//! Windows have the apps; elsewhere the request is refused with the reference's message. Absent
//! (405) in restricted mode. The path is passed as an argument, never inside a script.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::super::errors::ApiError;
use super::super::openapi::{Detail, Invalid, OpenIn, OpenInAnswer};
use super::super::state::AppState;
use super::Routes;
use super::common;

const APPS: [&str; 6] = ["finder", "cursor", "vscode", "iterm", "terminal", "antigravity"];

pub fn routes() -> Routes {
    Routes::default().op::<__path_open_in, _, _>(open_in)
}

/// `POST /api/open-in`.
#[utoipa::path(post, path = "/api/open-in", tag = "open-in",
    request_body(content = OpenIn, content_type = "application/json"),
    responses((status = 200, description = "Opened.", body = OpenInAnswer),
        (status = 400, description = "Not macOS or Windows, or the path does not exist.", body = Detail),
        (status = 405, description = "Restricted mode.", body = Detail),
        (status = 500, description = "The command failed.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
async fn open_in(State(state): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    if state.restricted() {
        return Err(ApiError::method_not_allowed());
    }
    let body: Value = common::body(&bytes)?;
    let app = match body.get("app") {
        Some(Value::String(a)) if APPS.contains(&a.as_str()) => a.clone(),
        None => return Err(ApiError::validation("missing", &["body", "app"], "Field required", Value::Null)),
        Some(other) => {
            return Err(ApiError::validation(
                "literal_error",
                &["body", "app"],
                "Input should be 'finder', 'cursor', 'vscode', 'iterm', 'terminal' or 'antigravity'",
                other.clone(),
            ));
        }
    };
    let path = match common::string_field(body.get("path"), &["body", "path"])? {
        Some(p) => p,
        None => return Err(ApiError::validation("missing", &["body", "path"], "Field required", Value::Null)),
    };
    open(&app, &path).await?;
    Ok(axum::Json(json!({"ok": true, "detail": null})).into_response())
}

#[cfg(not(any(target_os = "macos", target_os = "windows")))]
async fn open(_app: &str, _path: &str) -> Result<(), ApiError> {
    Err(ApiError::bad_request("Open-in is only supported on macOS and Windows."))
}

#[cfg(any(target_os = "macos", target_os = "windows"))]
async fn open(app: &str, sent: &str) -> Result<(), ApiError> {
    let path = crate::session::catalog::expand_tilde(sent);
    let path =
        std::fs::canonicalize(&path).map_err(|_| ApiError::bad_request(format!("Path does not exist: {sent}")))?;
    let dir = if path.is_dir() { path.clone() } else { path.parent().map(|p| p.to_path_buf()).unwrap_or(path.clone()) };
    let p = path.to_string_lossy().to_string();
    let d = dir.to_string_lossy().to_string();
    let attempts: Vec<Vec<String>> = commands(app, &p, &d, path.is_dir())?;
    let mut last = String::new();
    for argv in attempts {
        let out = tokio::process::Command::new(&argv[0]).args(&argv[1..]).output().await;
        match out {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => last = e.to_string(),
        }
    }
    Err(ApiError::internal(if last.is_empty() { "Failed to open application.".to_string() } else { last }))
}

#[cfg(target_os = "macos")]
fn commands(app: &str, p: &str, d: &str, is_dir: bool) -> Result<Vec<Vec<String>>, ApiError> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let script = |app_name: &str| {
        format!(
            "on run argv\ntell application \"{app_name}\" to activate\ntell application \"{app_name}\" to do script \"cd \" & quoted form of (item 1 of argv)\nend run"
        )
    };
    Ok(match app {
        "finder" if is_dir => vec![v(&["open", p])],
        "finder" => vec![v(&["open", "-R", p])],
        "cursor" => vec![v(&["open", "-a", "Cursor", p])],
        "vscode" => vec![v(&["open", "-a", "Visual Studio Code", p]), v(&["open", "-a", "Code", p])],
        "antigravity" => vec![v(&["open", "-a", "Antigravity", p])],
        "terminal" => vec![v(&["osascript", "-e", &script("Terminal"), d])],
        _ => vec![v(&["open", "-a", "iTerm", d]), v(&["open", "-a", "iTerm2", d])],
    })
}

#[cfg(target_os = "windows")]
fn commands(app: &str, p: &str, d: &str, is_dir: bool) -> Result<Vec<Vec<String>>, ApiError> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(match app {
        "finder" if is_dir => vec![v(&["explorer", p])],
        "finder" => vec![v(&["explorer", &format!("/select,{p}")])],
        "cursor" => vec![v(&["cmd", "/c", "start", "", "cursor", p])],
        "vscode" => vec![v(&["cmd", "/c", "start", "", "code", p])],
        "terminal" => vec![v(&["wt.exe", "-d", d]), v(&["cmd.exe", "/K", "cd", "/d", d])],
        other => return Err(ApiError::bad_request(format!("{other} is not supported on Windows."))),
    })
}
