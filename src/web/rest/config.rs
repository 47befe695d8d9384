//! Config endpoints (`docs/web-api.md` §5): the model list, switching the default model or
//! thinking (then restarting running sessions), and the file's text with secrets redacted.
//! Everything but the model list is refused in restricted mode.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::super::errors::ApiError;
use super::super::openapi::{
    ConfigPatch, ConfigPatched, ConfigToml, ConfigTomlWrite, ConfigTomlWritten, ConfigView, Detail, Invalid,
};
use super::super::state::AppState;
use super::Routes;
use super::common::{self, blocking};
use crate::config::web as view;

const RESTRICTED: &str = "Sensitive config APIs are disabled in this mode.";

pub fn routes() -> Routes {
    Routes::default()
        .op::<__path_read, _, _>(read)
        .op::<__path_patch, _, _>(patch)
        .alias("/api/config", "/api/config/", get(read).patch(patch))
        .op::<__path_read_toml, _, _>(read_toml)
        .op::<__path_write_toml, _, _>(write_toml)
}

fn refuse_if_restricted(state: &AppState) -> Result<(), ApiError> {
    if state.restricted() { Err(ApiError::forbidden(RESTRICTED)) } else { Ok(()) }
}

/// The config file's view, or why it does not load; `model` is the `-m` choice, shown as the
/// default model while it applies.
fn load_view(path: &std::path::Path, model: Option<String>) -> Result<view::GlobalConfigView, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let config = crate::config::load_file(path).map_err(|e| e.to_string())?;
    let mut shown = view::global_view(&config, &view::model_order(&text));
    if let Some(model) = model {
        shown.default_model = model;
    }
    Ok(shown)
}

fn internal_error() -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "Internal Server Error")
        .into_response()
}

#[utoipa::path(get, path = "/api/config/", tag = "config",
    responses((status = 200, description = "The models of `config.toml` (no secrets) and the sandbox sessions get.", body = ConfigView),
        (status = 500, description = "The config does not load.", content_type = "text/plain", body = String)))]
/// `GET /api/config/`.
async fn read(State(state): State<AppState>) -> Result<Response, ApiError> {
    let (path, model) = (state.config_path(), state.model_choice());
    match blocking(move || load_view(&path, model)).await? {
        Ok(v) => {
            let mut v = serde_json::to_value(v).map_err(|e| ApiError::internal(e.to_string()))?;
            if let Some(map) = v.as_object_mut() {
                map.insert("sandbox".into(), state.sandbox_view());
            }
            Ok(axum::Json(v).into_response())
        }
        Err(e) => {
            tracing::warn!("GET /api/config/: {e}");
            Ok(internal_error())
        }
    }
}

#[utoipa::path(patch, path = "/api/config/", tag = "config",
    request_body(content = ConfigPatch, content_type = "application/json"),
    responses((status = 200, description = "Edited in place; running sessions restarted unless asked not to.", body = ConfigPatched),
        (status = 400, description = "Model not found in config.", body = Detail), (status = 409, description = "Session has clients in other processes: a session the restart would close has other kiwi processes attached (kiwi, `docs/web.md` §3.6); nothing is changed.", body = Detail), (status = 403, description = "Sensitive config APIs are disabled in this mode.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `PATCH /api/config/`.
async fn patch(State(state): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body: Value = common::optional_body(&bytes)?;
    let default_model = common::string_field(body.get("default_model"), &["body", "default_model"])?;
    let default_thinking = common::bool_field(body.get("default_thinking"), &["body", "default_thinking"])?;
    let restart = common::bool_field(body.get("restart_running_sessions"), &["body", "restart_running_sessions"])?
        .unwrap_or(true);
    let force = common::bool_field(body.get("force_restart_busy_sessions"), &["body", "force_restart_busy_sessions"])?
        .unwrap_or(false);
    refuse_if_restricted(&state)?;
    if restart && state.hosting.restart_would_detach(force) {
        return Err(ApiError::conflict(common::OTHER_CLIENTS));
    }
    let path = state.config_path();
    let model_picked = default_model.is_some();
    blocking(move || -> Result<(), ApiError> {
        let config = crate::config::load_file(&path).map_err(|e| ApiError::internal(e.to_string()))?;
        if let Some(m) = &default_model
            && !config.models.contains_key(m)
        {
            return Err(ApiError::bad_request(format!("Model '{m}' not found in config")));
        }
        if default_model.is_some() || default_thinking.is_some() {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let edited =
                view::set_defaults(&text, default_model.as_deref(), default_thinking).map_err(ApiError::internal)?;
            view::write_atomic(&path, &edited)
                .map_err(|e| ApiError::internal(format!("Cannot write {}: {e}", path.display())))?;
        }
        Ok(())
    })
    .await??;
    let (restarted, skipped) = if restart {
        let outcome = state.restart_sessions(force, model_picked).await.map_err(ApiError::internal)?;
        (outcome.restarted, outcome.skipped_busy)
    } else {
        state.reload_setup(model_picked).map_err(ApiError::internal)?;
        (Vec::new(), Vec::new())
    };
    let (path, model) = (state.config_path(), state.model_choice());
    let config = blocking(move || load_view(&path, model)).await?.map_err(ApiError::internal)?;
    let none_if_empty = |v: Vec<String>| if v.is_empty() { Value::Null } else { json!(v) };
    Ok(axum::Json(json!({
        "config": config,
        "restarted_session_ids": none_if_empty(restarted),
        "skipped_busy_session_ids": none_if_empty(skipped),
    }))
    .into_response())
}

#[utoipa::path(get, path = "/api/config/toml", tag = "config",
    responses((status = 200, description = "The file's text, every secret replaced by `********`.", body = ConfigToml), (status = 403, description = "Sensitive config APIs are disabled in this mode.", body = Detail),
        (status = 500, description = "The file is not TOML.", body = Detail)))]
/// `GET /api/config/toml`: the text with every secret redacted.
async fn read_toml(State(state): State<AppState>) -> Result<Response, ApiError> {
    refuse_if_restricted(&state)?;
    let path = state.config_path();
    let shown = path.to_string_lossy().to_string();
    let content = blocking(move || match std::fs::read_to_string(&path) {
        Ok(text) => view::redact(&text)
            .map_err(|e| ApiError::internal(format!("config.toml is not valid TOML, not shown: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(ApiError::internal(format!("Cannot read config.toml: {e}"))),
    })
    .await??;
    Ok(axum::Json(json!({"content": content, "path": shown})).into_response())
}

#[utoipa::path(put, path = "/api/config/toml", tag = "config",
    request_body(content = ConfigTomlWrite, content_type = "application/json"),
    responses((status = 200, description = "Always 200: whether the text was written, or why not.", body = ConfigTomlWritten), (status = 403, description = "Sensitive config APIs are disabled in this mode.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
/// `PUT /api/config/toml`: replaces the file after checking it; redacted placeholders keep the
/// stored secrets. Always 200 with `{"success", "error"}` for a well-formed request.
async fn write_toml(State(state): State<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body: Value = common::body(&bytes)?;
    let content = match body.get("content") {
        Some(Value::String(s)) => s.clone(),
        None => return Err(ApiError::validation("missing", &["body", "content"], "Field required", Value::Null)),
        Some(other) => {
            return Err(ApiError::validation(
                "string_type",
                &["body", "content"],
                "Input should be a valid string",
                other.clone(),
            ));
        }
    };
    refuse_if_restricted(&state)?;
    let path = state.config_path();
    let outcome = blocking(move || -> Result<(), String> {
        view::check_toml(&content)?;
        let disk = std::fs::read_to_string(&path).unwrap_or_default();
        let text = view::restore_secrets(&content, &disk)?;
        view::check_toml(&text)?;
        view::write_atomic(&path, &text).map_err(|e| format!("Cannot write {}: {e}", path.display()))
    })
    .await?;
    if outcome.is_ok()
        && let Err(e) = state.reload_setup(false)
    {
        tracing::warn!("the config written does not build sessions: {e}");
    }
    Ok(axum::Json(match outcome {
        Ok(()) => json!({"success": true, "error": null}),
        Err(e) => json!({"success": false, "error": e}),
    })
    .into_response())
}
