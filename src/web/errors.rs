//! The API's errors as the reference's clients read them (`docs/web.md` §2.1): a JSON body
//! `{"detail": <text>}` with the status of the spec, and for invalid input 422 with FastAPI's
//! list shape `{"detail":[{"type","loc","msg","input"}]}` (clients rely on `loc` and `msg`).
//!
//! Invariant: every error the API answers goes through [`ApiError`], so the body shape cannot
//! drift between endpoints; short `detail` texts are interface facts and kept exact.

use axum::extract::FromRequest;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// `detail` of a request for a session that is not there.
pub const SESSION_NOT_FOUND: &str = "Session not found";
/// `detail` of a change refused while a prompt runs.
pub const SESSION_BUSY: &str = "Session is busy. Please wait for it to complete before modifying.";

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// A string, or the 422 list.
    pub detail: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self { status, detail: Value::String(detail.into()) }
    }

    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 404 `Not Found`: no such path.
    pub fn no_route() -> Self {
        Self::not_found("Not Found")
    }

    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized")
    }

    pub fn session_not_found() -> Self {
        Self::not_found(SESSION_NOT_FOUND)
    }

    pub fn busy() -> Self {
        Self::bad_request(SESSION_BUSY)
    }

    /// 409: the change needs the session here and alone (`docs/web.md` §3.6).
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }

    /// 422 with one FastAPI-shaped item: `kind` (e.g. `missing`, `bool_parsing`, `uuid_parsing`),
    /// where (`["body", "title"]`, `["path", "session_id"]`, `["query", "limit"]`), the message
    /// and the offending input.
    pub fn validation(kind: &str, loc: &[&str], msg: impl Into<String>, input: Value) -> Self {
        Self::validation_items(vec![json!({"type": kind, "loc": loc, "msg": msg.into(), "input": input})])
    }

    /// 422 with several items (each `{"type","loc","msg","input"}`).
    pub fn validation_items(items: Vec<Value>) -> Self {
        Self { status: StatusCode::UNPROCESSABLE_ENTITY, detail: Value::Array(items) }
    }

    /// A path `session_id` that is not a UUID.
    pub fn bad_session_id(input: &str) -> Self {
        Self::validation(
            "uuid_parsing",
            &["path", "session_id"],
            "Input should be a valid UUID",
            Value::String(input.to_string()),
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.detail {
            Value::String(s) => write!(f, "{} {s}", self.status.as_u16()),
            other => write!(f, "{} {other}", self.status.as_u16()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"detail": self.detail}).to_string();
        (self.status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// A JSON body whose failures answer 422 in FastAPI's shape instead of axum's plain text.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(&rejection)),
        }
    }
}

/// axum's JSON rejections as 422 items (`json_invalid` for syntax, `model_attributes_type` for
/// a body of the wrong shape, `missing` without a JSON content type).
pub fn json_rejection(rejection: &JsonRejection) -> ApiError {
    let (kind, msg) = match rejection {
        JsonRejection::JsonSyntaxError(e) => ("json_invalid", format!("JSON decode error: {}", inner(e))),
        JsonRejection::JsonDataError(e) => ("model_attributes_type", inner(e)),
        JsonRejection::MissingJsonContentType(_) => ("missing", "Field required".to_string()),
        other => ("value_error", other.body_text()),
    };
    ApiError::validation(kind, &["body"], msg, Value::Null)
}

fn inner(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = s.to_string();
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(r: Response) -> (u16, String) {
        let status = r.status().as_u16();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn shapes() {
        assert_eq!(body(ApiError::no_route().into_response()).await, (404, r#"{"detail":"Not Found"}"#.into()));
        assert_eq!(
            body(ApiError::method_not_allowed().into_response()).await,
            (405, r#"{"detail":"Method Not Allowed"}"#.into())
        );
        assert_eq!(
            body(ApiError::busy().into_response()).await.1,
            r#"{"detail":"Session is busy. Please wait for it to complete before modifying."}"#
        );
        let v = ApiError::validation("bool_parsing", &["body", "default_thinking"], "bad", json!("maybe"));
        assert_eq!(
            body(v.into_response()).await,
            (
                422,
                r#"{"detail":[{"type":"bool_parsing","loc":["body","default_thinking"],"msg":"bad","input":"maybe"}]}"#
                    .into()
            )
        );
    }
}
