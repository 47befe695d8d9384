//! Why a connection to an MCP server or a request on it failed, with the one distinction the
//! OAuth refresh needs: the server refused the request's credentials (HTTP 401) or not.
//!
//! Invariant: [`LinkError::Unauthorized`] comes only from a transport's own typed error (rmcp's
//! Streamable HTTP client, kiwi's SSE transport), never from text a server wrote. A tool's
//! JSON-RPC error that says "HTTP 401" is an ordinary failure: taking it for a refused token
//! would refresh the token and run the call a second time.

use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::{AuthRequiredError, StreamableHttpError};

use super::sse::SseError;

/// A failed connection or request; the text is what the user or the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// The server answered HTTP 401: the token was refused (or none was sent).
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Failed(String),
}

impl LinkError {
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, LinkError::Unauthorized(_))
    }

    /// The text, whatever the kind.
    pub fn into_text(self) -> String {
        match self {
            LinkError::Unauthorized(text) | LinkError::Failed(text) => text,
        }
    }

    /// `text` as the kind `source` says.
    fn classify(source: &(dyn std::error::Error + 'static), text: String) -> Self {
        if unauthorized(source) { LinkError::Unauthorized(text) } else { LinkError::Failed(text) }
    }

    /// A request on an open session failed (`describe` gives the text).
    pub fn of_request(e: &ServiceError, text: String) -> Self {
        Self::classify(e, text)
    }

    /// Opening a session failed at `initialize`.
    pub fn of_initialize(e: &ClientInitializeError, text: String) -> Self {
        match e {
            // The transport error is a field, not the error's `source`.
            ClientInitializeError::TransportError { error, .. } => Self::classify(error, text),
            other => Self::classify(other, text),
        }
    }

    /// Opening an SSE stream failed.
    pub fn of_sse(e: &SseError) -> Self {
        Self::classify(e, e.to_string())
    }
}

impl From<String> for LinkError {
    fn from(text: String) -> Self {
        LinkError::Failed(text)
    }
}

/// Whether `error` or one of its sources is a transport's HTTP 401.
fn unauthorized(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<AuthRequiredError>() || e.downcast_ref::<SseError>().is_some_and(SseError::is_unauthorized) {
            return true;
        }
        if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            match http {
                StreamableHttpError::AuthRequired(_) => return true,
                // A 401 without a `WWW-Authenticate` challenge (which MCP servers must send, but
                // some do not) has no variant of its own; rmcp words it `HTTP <status>: <body>`
                // from the response's status, so the prefix is the transport's, not the server's.
                StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP 401 ") => return true,
                _ => {}
            }
        }
        // rmcp's `TransportSend` and `DynamicTransportError` name their inner error as the source.
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    fn transport(e: impl std::error::Error + Send + Sync + 'static) -> ServiceError {
        ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
            "test",
            std::any::TypeId::of::<()>(),
            Box::new(e),
        ))
    }

    #[test]
    fn a_transport_401_is_unauthorized() {
        let challenge = StreamableHttpError::<reqwest::Error>::AuthRequired(AuthRequiredError::new("Bearer".into()));
        assert!(LinkError::of_request(&transport(challenge), "x".into()).is_unauthorized());
        let bare = StreamableHttpError::<reqwest::Error>::UnexpectedServerResponse("HTTP 401 Unauthorized: ".into());
        assert!(LinkError::of_request(&transport(bare), "x".into()).is_unauthorized());
        let sse = SseError::PostStatus(StatusCode::UNAUTHORIZED);
        assert!(LinkError::of_request(&transport(sse), "x".into()).is_unauthorized());
        let sse = SseError::Status { status: StatusCode::UNAUTHORIZED, url: "http://h/sse".into() };
        assert!(LinkError::of_sse(&sse).is_unauthorized());
    }

    #[test]
    fn words_are_not_a_401() {
        // What a server writes, however it is worded, is a failure of that request only.
        let said = ServiceError::McpError(rmcp::ErrorData::internal_error("upstream: HTTP 401 Unauthorized", None));
        assert_eq!(
            LinkError::of_request(&said, "upstream: HTTP 401 Unauthorized".into()),
            LinkError::Failed("upstream: HTTP 401 Unauthorized".into())
        );
        let other = StreamableHttpError::<reqwest::Error>::UnexpectedServerResponse("HTTP 500: HTTP 401".into());
        assert!(!LinkError::of_request(&transport(other), "x".into()).is_unauthorized());
        let sse = SseError::PostStatus(StatusCode::FORBIDDEN);
        assert!(!LinkError::of_request(&transport(sse), "x".into()).is_unauthorized());
        let closed = ClientInitializeError::ConnectionClosed("HTTP 401".into());
        assert!(!LinkError::of_initialize(&closed, "x".into()).is_unauthorized());
    }
}
