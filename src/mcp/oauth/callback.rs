//! The local HTTP server the browser is sent back to (`docs/subcommands.md` §1.6 step 5): `GET /callback?code=…&state=…`
//! on `localhost:<port>`. It answers every request with a small page and hands the flow the
//! first callback that carries the flow's `state` (its code, or the authorization server's
//! `error`); other paths (a browser's `/favicon.ico`) get 404 and are ignored.
//!
//! Any local process can reach the port, so nothing but the real callback may end or hold up the
//! flow: a callback with a wrong or missing `state` (a forged code or `error=`) gets an error
//! page and the flow keeps waiting, and connections are served concurrently (at most
//! [`MAX_CONNECTIONS`] at once), each within [`CONNECTION_DEADLINE`], so idle connections cannot
//! keep the browser's from being served.
//!
//! `localhost` may resolve to 127.0.0.1 or ::1 in the user's browser, so both are listened on
//! when the machine has IPv6 (the port is chosen on 127.0.0.1).

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::FlowError;

/// How long one connection may take, from its accept to the end of the answer.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);

/// Connections served at once; one more is closed as soon as it is accepted.
const MAX_CONNECTIONS: usize = 64;

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

    /// Waits up to `limit` for the callback with `state`: its authorization code, or the error
    /// the authorization server sent back. Other requests are answered and waited past.
    pub async fn wait(&self, state: &str, limit: Duration) -> Result<String, FlowError> {
        let state: Arc<str> = Arc::from(state);
        let (found, mut callback) = tokio::sync::mpsc::channel(1);
        // Dropped with this call: connections still being served end with it.
        let mut connections = tokio::task::JoinSet::new();
        let waiting = async {
            loop {
                let accepted = tokio::select! {
                    outcome = callback.recv() => match outcome {
                        Some(outcome) => return outcome,
                        None => continue,
                    },
                    a = self.v4.accept() => a,
                    a = async { match &self.v6 { Some(l) => l.accept().await, None => std::future::pending().await } } => a,
                };
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors, say: let connections end rather than spin.
                        tracing::warn!("OAuth callback server: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                while connections.try_join_next().is_some() {}
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!("OAuth callback server: {MAX_CONNECTIONS} connections open; closing another");
                    continue;
                }
                let (state, found) = (state.clone(), found.clone());
                connections.spawn(async move {
                    if let Ok(Some(outcome)) = tokio::time::timeout(CONNECTION_DEADLINE, serve(stream, &state)).await {
                        let _ = found.send(outcome).await;
                    }
                });
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

/// Answers one request; `Some` when it was the callback of this flow (its `state` matches).
async fn serve(mut stream: TcpStream, state: &str) -> Option<Result<String, FlowError>> {
    let head = read_head(&mut stream).await?;
    let target = head.lines().next()?.split(' ').nth(1)?.to_string();
    let url = Url::parse(&format!("http://localhost{target}")).ok()?;
    if url.path() != "/callback" {
        respond(&mut stream, "404 Not Found", "Not found.").await;
        return None;
    }
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    if !param("state").is_some_and(|s| same(&s, state)) {
        // Not the authorization server's answer to this flow: whoever sent it learns nothing and
        // changes nothing.
        tracing::warn!("OAuth callback server: a callback without this flow's state was ignored");
        let text = "This is not the answer to the authorization kiwi is waiting for (its state parameter does not match); kiwi keeps waiting.";
        respond(&mut stream, "400 Bad Request", text).await;
        return None;
    }
    let outcome = if let Some(error) = param("error") {
        let detail = param("error_description").map(|d| format!(" ({d})")).unwrap_or_default();
        Err(FlowError::new("OAuthFlowError", format!("the authorization server refused: {error}{detail}")))
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

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
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
        // The authorization server's refusal (with the flow's state) ends the flow.
        let (outcome, _) = tokio::join!(
            server.wait("s1", Duration::from_secs(5)),
            get(format!("{base}/callback?error=access_denied&state=s1"))
        );
        assert_eq!(outcome.unwrap_err().to_string(), "OAuthFlowError: the authorization server refused: access_denied");
        let outcome = server.wait("s1", Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(outcome.to_string(), "TimeoutError: OAuth callback timed out after 0.05 seconds");
    }

    #[tokio::test]
    async fn forged_callbacks_and_idle_connections_do_not_stop_the_flow() {
        use tokio::io::AsyncWriteExt;
        let server = CallbackServer::bind(None).await.unwrap();
        let port = server.port();
        let base = format!("http://127.0.0.1:{port}");
        let get = |path: String| async move {
            let client = crate::net::client_builder().build().unwrap();
            client.get(path).send().await.map(|r| r.status().as_u16()).unwrap()
        };
        let hostile = async {
            // Connections that never finish their request: each would hold a one-at-a-time server.
            let mut idle = Vec::new();
            for i in 0..(MAX_CONNECTIONS + 3) {
                let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                if i % 2 == 0 {
                    let _ = s.write_all(b"GET /callback?code=x").await;
                }
                idle.push(s);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(idle.drain(..4));
            tokio::time::sleep(Duration::from_millis(100)).await;
            let forged = [
                get(format!("{base}/callback?code=forged&state=other")).await,
                get(format!("{base}/callback?error=access_denied&state=other")).await,
                get(format!("{base}/callback?code=forged")).await,
                get(format!("{base}/callback?error=access_denied")).await,
            ];
            let real = get(format!("{base}/callback?code=real&state=s1")).await;
            (forged, real, idle)
        };
        let (outcome, (forged, real, _idle)) = tokio::join!(server.wait("s1", Duration::from_secs(5)), hostile);
        assert_eq!(outcome.unwrap(), "real");
        assert_eq!(forged, [400; 4]);
        assert_eq!(real, 200);
    }
}
