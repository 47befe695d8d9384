//! What the REST handlers share: the session a path names (422 for a non-UUID, 404 when unknown),
//! the Session object, bodies that may be empty, and FastAPI-shaped query errors.

use axum::body::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::super::errors::ApiError;
use super::super::hosted::SessionStatus;
use super::super::state::AppState;
use crate::session::catalog::{self, SessionInfo};

/// A path `session_id` checked to be a lowercase-or-not UUID (422 otherwise).
pub fn check_id(id: &str) -> Result<(), ApiError> {
    uuid::Uuid::parse_str(id).map(|_| ()).map_err(|_| ApiError::bad_session_id(id))
}

/// The stored session a path names: 422 for a non-UUID, 404 `Session not found` when unknown.
pub async fn session(state: &AppState, id: &str) -> Result<SessionInfo, ApiError> {
    check_id(id)?;
    let share = state.share_dir().to_path_buf();
    let id = id.to_lowercase();
    blocking(move || catalog::find(&share, &id)).await?.ok_or_else(ApiError::session_not_found)
}

/// Runs file-system work off the async threads.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(format!("Internal error: {e}")))
}

/// 400 when a prompt of the session is in flight.
pub fn not_busy(state: &AppState, id: &str) -> Result<(), ApiError> {
    if state.is_busy(id) { Err(ApiError::busy()) } else { Ok(()) }
}

/// The 409 of a change that needs the session idle here (`docs/web.md` §3.6): another process
/// hosts it.
pub const HOSTED_ELSEWHERE: &str = "Session is hosted by another process";
/// The 409 of such a change on a session this server hosts while other processes are attached.
pub const OTHER_CLIENTS: &str = "Session has clients in other processes";

/// 409 when another process hosts the session, or when this server hosts it and other kiwi
/// processes are attached to it (delete, archive, a config restart would pull it from them).
pub async fn local_and_unshared(state: &AppState, id: &str) -> Result<(), ApiError> {
    if state.hosting.attached_elsewhere(id) > 0 {
        return Err(ApiError::conflict(OTHER_CLIENTS));
    }
    if state.hosting.hosted_elsewhere(id).await {
        return Err(ApiError::conflict(HOSTED_ELSEWHERE));
    }
    Ok(())
}

/// How the Session object's `is_running` / `status` are filled.
pub enum Live {
    /// From the hosted sessions.
    Hosted,
    /// `is_running:false`, `status:null` (the update endpoint).
    Null,
    /// `is_running:false` and a `stopped` status with seq 0 (a new or forked session).
    Stopped,
}

/// The Session object (`docs/web-api.md` §1), members in the reference's order.
pub fn session_json(state: &AppState, info: &SessionInfo, live: Live) -> Value {
    let (is_running, status) = match live {
        Live::Hosted => (
            state.is_running(&info.id),
            state.status(&info.id).map(|s| serde_json::to_value(s).unwrap_or(Value::Null)).unwrap_or(Value::Null),
        ),
        Live::Null => (false, Value::Null),
        Live::Stopped => (false, serde_json::to_value(SessionStatus::stopped(&info.id)).unwrap_or(Value::Null)),
    };
    json!({
        "session_id": info.id,
        "title": info.title,
        "last_updated": catalog::rfc3339(info.last_updated),
        "is_running": is_running,
        "status": status,
        "work_dir": info.work_dir,
        "session_dir": info.session_dir.to_string_lossy(),
        "archived": info.archived,
    })
}

/// A JSON body that may be absent or empty (then `T::default()`); malformed → 422.
pub fn optional_body<T: DeserializeOwned + Default>(bytes: &Bytes) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    body(bytes)
}

/// A required JSON body; absent, malformed or of the wrong shape → 422.
pub fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation("missing", &["body"], "Field required", Value::Null));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::validation("json_invalid", &["body"], format!("JSON decode error: {e}"), Value::Null))?;
    if !value.is_object() {
        return Err(ApiError::validation(
            "model_attributes_type",
            &["body"],
            "Input should be a valid dictionary or object to extract fields from",
            value,
        ));
    }
    serde_json::from_value(value.clone()).map_err(|e| field_error(&value, &e.to_string()))
}

/// A serde error on an object body as one 422 item naming the field when serde names it.
fn field_error(value: &Value, message: &str) -> ApiError {
    let field = value
        .as_object()
        .and_then(|o| o.keys().find(|k| message.contains(&format!("`{k}`")) || message.contains(k.as_str())).cloned());
    // A body of one member: that member is the one at fault.
    let field = field.or_else(|| value.as_object().filter(|o| o.len() == 1).and_then(|o| o.keys().next().cloned()));
    let missing = message.starts_with("missing field");
    let name = match (&field, missing) {
        (Some(f), _) => f.clone(),
        (None, true) => message.split('`').nth(1).unwrap_or("body").to_string(),
        (None, false) => "body".to_string(),
    };
    let input = value.get(&name).cloned().unwrap_or(Value::Null);
    let (kind, msg) =
        if missing { ("missing", "Field required".to_string()) } else { ("value_error", message.to_string()) };
    if name == "body" {
        ApiError::validation(kind, &["body"], msg, input)
    } else {
        ApiError::validation(kind, &["body", &name], msg, input)
    }
}

/// A field that must be a boolean (or null): Python's lenient spellings accepted.
pub fn bool_field(value: Option<&Value>, loc: &[&str]) -> Result<Option<bool>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => Ok(Some(n.as_i64() == Some(1))),
        Some(Value::String(s)) => parse_bool(s).map(Some).ok_or_else(|| bool_error(loc, value)),
        Some(_) => Err(bool_error(loc, value)),
    }
}

fn bool_error(loc: &[&str], value: Option<&Value>) -> ApiError {
    let kind = if matches!(value, Some(Value::String(_))) { "bool_parsing" } else { "bool_type" };
    let msg = if kind == "bool_parsing" {
        "Input should be a valid boolean, unable to interpret input"
    } else {
        "Input should be a valid boolean"
    };
    ApiError::validation(kind, loc, msg, value.cloned().unwrap_or(Value::Null))
}

/// Python's boolean spellings (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`, `t`/`f`, `y`/`n`).
pub fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Some(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Some(false),
        _ => None,
    }
}

/// A field that must be a string (or null).
pub fn string_field(value: Option<&Value>, loc: &[&str]) -> Result<Option<String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::validation("string_type", loc, "Input should be a valid string", other.clone())),
    }
}

/// An integer query parameter (422 `int_parsing` otherwise).
pub fn int_query(value: Option<&String>, name: &str) -> Result<Option<i64>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| {
            ApiError::validation(
                "int_parsing",
                &["query", name],
                "Input should be a valid integer, unable to parse string as an integer",
                Value::String(v.clone()),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_fields() {
        #[derive(Debug, serde::Deserialize, Default)]
        struct B {
            #[allow(dead_code)]
            turn_index: u64,
        }
        assert!(optional_body::<Value>(&Bytes::from_static(b"")).is_ok());
        let e = body::<B>(&Bytes::from_static(b"")).unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        let e = body::<B>(&Bytes::from_static(b"{")).unwrap_err();
        assert_eq!(e.detail[0]["type"], "json_invalid");
        let e = body::<B>(&Bytes::from_static(b"{}")).unwrap_err();
        assert_eq!(e.detail[0]["loc"], json!(["body", "turn_index"]));
        assert_eq!(e.detail[0]["msg"], "Field required");
        let e = body::<B>(&Bytes::from_static(b"{\"turn_index\": -1}")).unwrap_err();
        assert_eq!(e.detail[0]["loc"], json!(["body", "turn_index"]));
        assert_eq!(bool_field(Some(&json!("yes")), &["body", "x"]).unwrap(), Some(true));
        let e = bool_field(Some(&json!("maybe")), &["body", "default_thinking"]).unwrap_err();
        assert_eq!(e.detail[0]["type"], "bool_parsing");
        assert_eq!(e.detail[0]["msg"], "Input should be a valid boolean, unable to interpret input");
        assert!(int_query(Some(&"x".to_string()), "limit").is_err());
        assert_eq!(int_query(Some(&"-3".to_string()), "limit").unwrap(), Some(-3));
    }
}
