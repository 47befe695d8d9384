//! The local HTTP server the browser is sent back to (§1.6 step 5): `GET /callback?code=…&state=…`
//! on `localhost:<port>`. It answers every request with a small page and hands the first
//! callback to the flow; other paths (a browser's `/favicon.ico`) get 404 and are ignored.
//!
//! `localhost` may resolve to 127.0.0.1 or ::1 in the user's browser, so both are listened on
//! when the machine has IPv6 (the port is chosen on 127.0.0.1).

use std::time::Duration;

use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::FlowError;

/// How long a connected browser may take to send its request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request head read.
const HEAD_MAX: usize = 16 * 1024;

pub struct CallbackServer {
    v4: TcpListener,
    v6: Option<TcpListener>,
    port: u16,
}

impl CallbackServer {
    /// Listens on `preferred` when it is free (a stored client was registered with that port's
    /// redirect URI), else on a free port.
    pub async fn bind(preferred: Option<u16>) -> Result<Self, FlowError> {
        let v4 = match preferred {
            Some(port) => match TcpListener::bind(("127.0.0.1", port)).await {
                Ok(l) => Ok(l),
                Err(_) => TcpListener::bind(("127.0.0.1", 0)).await,
            },
            None => TcpListener::bind(("127.0.0.1", 0)).await,
        }
        .map_err(|e| FlowError::new("OSError", format!("cannot listen for the OAuth callback: {e}")))?;
        let port = v4.local_addr().map_err(|e| FlowError::new("OSError", e.to_string()))?.port();
        let v6 = TcpListener::bind(("::1", port)).await.ok();
        Ok(Self { v4, v6, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn redirect_uri(&self) -> String {
        format!("http://localhost:{}/callback", self.port)
    }

    /// Waits up to `limit` for the callback; the authorization code when its `state` matches.
    pub async fn wait(&self, state: &str, limit: Duration) -> Result<String, FlowError> {
        let waiting = async {
            loop {
                let accepted = tokio::select! {
                    a = self.v4.accept() => a,
                    a = async { match &self.v6 { Some(l) => l.accept().await, None => std::future::pending().await } } => a,
                };
                let Ok((stream, _)) = accepted else { continue };
                if let Some(outcome) = serve(stream, state).await {
                    return outcome;
                }
            }
        };
        match tokio::time::timeout(limit, waiting).await {
            Ok(outcome) => outcome,
            Err(_) => Err(FlowError::new(
                "TimeoutError",
                format!("OAuth callback timed out after {} seconds", python_float(limit.as_secs_f64())),
            )),
        }
    }
}

/// A number of seconds as Python prints a float (`300.0`, `0.5`).
fn python_float(x: f64) -> String {
    if x.fract() == 0.0 { format!("{x:.1}") } else { format!("{x}") }
}

/// Answers one request; `Some` when it was the callback.
async fn serve(mut stream: TcpStream, state: &str) -> Option<Result<String, FlowError>> {
    let head = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await.ok()??;
    let target = head.lines().next()?.split(' ').nth(1)?.to_string();
    let url = Url::parse(&format!("http://localhost{target}")).ok()?;
    if url.path() != "/callback" {
        respond(&mut stream, "404 Not Found", "Not found.").await;
        return None;
    }
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    let outcome = if let Some(error) = param("error") {
        let detail = param("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
        Err(FlowError::new("OAuthFlowError", format!("the authorization server refused: {error}{detail}")))
    } else if param("state").as_deref() != Some(state) {
        Err(FlowError::new("OAuthFlowError", "the callback's state parameter does not match the request's"))
    } else {
        match param("code").filter(|c| !c.is_empty()) {
            Some(code) => Ok(code),
            None => Err(FlowError::new("OAuthFlowError", "the callback carries no authorization code")),
        }
    };
    match &outcome {
        Ok(_) => {
            respond(&mut stream, "200 OK", "Authorization complete. You can close this window and return to kiwi.")
                .await
        }
        Err(e) => respond(&mut stream, "400 Bad Request", &format!("Authorization failed: {}", e.message)).await,
    }
    Some(outcome)
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > HEAD_MAX {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>kiwi</title></head><body><p>{}</p></body></html>",
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    );
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_print_like_python() {
        assert_eq!(python_float(300.0), "300.0");
        assert_eq!(python_float(0.5), "0.5");
    }

    #[tokio::test]
    async fn the_callback_hands_over_the_code_and_checks_the_state() {
        let server = CallbackServer::bind(None).await.unwrap();
        let base = format!("http://127.0.0.1:{}", server.port());
        let get = |path: String| async move {
            let client = crate::net::client_builder().build().unwrap();
            client.get(path).send().await.map(|r| r.status().as_u16())
        };
        let (outcome, _, status) =
            tokio::join!(server.wait("s1", Duration::from_secs(5)), get(format!("{base}/favicon.ico")), async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                get(format!("{base}/callback?code=c%2B1&state=s1")).await
            });
        assert_eq!(outcome.unwrap(), "c+1");
        assert_eq!(status.unwrap(), 200);
        let (outcome, _) =
            tokio::join!(server.wait("s1", Duration::from_secs(5)), get(format!("{base}/callback?code=c&state=other")));
        assert_eq!(outcome.unwrap_err().kind, "OAuthFlowError");
        let outcome = server.wait("s1", Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(outcome.to_string(), "TimeoutError: OAuth callback timed out after 0.05 seconds");
    }
}
