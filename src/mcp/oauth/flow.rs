//! The interactive authorization of `kiwi mcp auth` (`docs/subcommands.md` §1.6 steps 2-6): discovery, dynamic client
//! registration, the authorization URL with PKCE (S256), `state` and `resource`, its pre-flight
//! check, the browser, the callback and the code exchange.
//!
//! Nothing is stored until the code exchange has succeeded: a flow that fails leaves the store
//! as it was (except that a client the authorization server rejected as unknown is forgotten).

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use rand::Rng;
use reqwest::Url;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::callback::CallbackServer;
use super::discovery::{AuthServer, discover};
use super::{FlowError, brief, http_client, token_request};
use crate::mcp::oauth_store;

/// How kiwi names itself to authorization servers (shown on their consent pages).
const CLIENT_NAME: &str = "kiwi";

/// Characters of PKCE verifiers and `state` values (RFC 7636 "unreserved").
const UNRESERVED: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";

fn random_text(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len).map(|_| UNRESERVED[rng.random_range(0..UNRESERVED.len())] as char).collect()
}

/// The S256 challenge of a PKCE verifier.
pub fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Runs the flow for the MCP server at `url` whose 401 carried `challenge`; stores the tokens,
/// the client and the expiry and returns the access token. `show` gets the authorization URL
/// once it has passed its pre-flight check (to print it and open the browser).
pub async fn authorize(
    share: &Path,
    url: &str,
    challenge: Option<&str>,
    callback_limit: Duration,
    show: &dyn Fn(&str),
) -> Result<String, FlowError> {
    let client = http_client()?;
    let server = discover(&client, url, challenge).await?;
    let stored = oauth_store::client_info(share, url).filter(|i| i.get("client_id").and_then(Value::as_str).is_some());
    let callback = CallbackServer::bind(stored.as_ref().and_then(callback_port)).await?;
    let redirect_uri = callback.redirect_uri();
    // A stored client is reused only when it was registered for this very redirect URI.
    let mut known = stored.filter(|i| redirect_uris(i).iter().any(|u| *u == redirect_uri));
    let no_redirects = crate::net::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| FlowError::new("RuntimeError", e.to_string()))?;
    loop {
        let (info, registered_now) = match known.take() {
            Some(info) => (info, false),
            None => (register(&client, &server, &redirect_uri).await?, true),
        };
        let client_id = info.get("client_id").and_then(Value::as_str).unwrap_or_default().to_string();
        let verifier = random_text(64);
        let state = random_text(32);
        let authorization_url = authorization_url(&server, &client_id, &redirect_uri, &state, &verifier, url)?;
        let response = no_redirects
            .get(&authorization_url)
            .send()
            .await
            .map_err(|e| FlowError::network("the authorization URL cannot be reached", &e))?;
        match response.status().as_u16() {
            200 | 302 | 303 | 307 | 308 => {}
            // The authorization server does not know the stored client (any more): forget it and
            // register once more.
            400 if !registered_now => {
                tracing::info!(
                    "the stored OAuth client for {} was rejected; registering again",
                    crate::net::loggable_url(url)
                );
                let _ = oauth_store::clear_client_info(share, url);
                continue;
            }
            status => {
                return Err(FlowError::new(
                    "OAuthFlowError",
                    format!("the authorization URL answered {status} to its pre-flight request"),
                ));
            }
        }
        show(&authorization_url);
        let code = callback.wait(&state, callback_limit).await?;
        let pairs = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", verifier.as_str()),
            ("resource", url),
        ];
        let token = token_request(&client, &server.token_endpoint, &info, &pairs).await?;
        let stored = oauth_store::save_client_info(share, url, &info)
            .and_then(|()| oauth_store::save_tokens(share, url, &token));
        if let Err(e) = stored {
            return Err(FlowError::new("OSError", format!("cannot store the tokens: {e}")));
        }
        return Ok(token["access_token"].as_str().unwrap_or_default().to_string());
    }
}

fn redirect_uris(info: &Map<String, Value>) -> Vec<&str> {
    info.get("redirect_uris")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The port of a stored client's `http://localhost:<port>/callback` redirect URI.
fn callback_port(info: &Map<String, Value>) -> Option<u16> {
    redirect_uris(info).iter().find_map(|u| {
        let url = Url::parse(u).ok()?;
        (url.host_str() == Some("localhost") && url.path() == "/callback").then(|| url.port()).flatten()
    })
}

/// Dynamic client registration (RFC 7591); the stored client info is what was asked for with the
/// server's answer laid over it.
async fn register(
    client: &reqwest::Client,
    server: &AuthServer,
    redirect_uri: &str,
) -> Result<Map<String, Value>, FlowError> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(FlowError::new(
            "OAuthRegistrationError",
            "the authorization server offers no dynamic client registration",
        ));
    };
    let request = json!({
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "client_name": CLIENT_NAME,
    });
    let response = client
        .post(endpoint)
        .json(&request)
        .send()
        .await
        .map_err(|e| FlowError::network("client registration failed", &e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| FlowError::network("client registration failed", &e))?;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(FlowError::new(
            "OAuthRegistrationError",
            format!("client registration answered {}: {}", status.as_u16(), brief(&text)),
        ));
    }
    let answer = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(answer)) if answer.get("client_id").and_then(Value::as_str).is_some_and(|c| !c.is_empty()) => {
            answer
        }
        _ => {
            return Err(FlowError::new(
                "OAuthRegistrationError",
                format!("the registration answer has no client_id: {}", brief(&text)),
            ));
        }
    };
    let mut info = request.as_object().cloned().unwrap_or_default();
    info.extend(answer);
    Ok(info)
}

fn authorization_url(
    server: &AuthServer,
    client_id: &str,
    redirect_uri: &str,
    state: &str,
    verifier: &str,
    resource: &str,
) -> Result<String, FlowError> {
    let mut url = Url::parse(&server.authorization_endpoint).map_err(|e| {
        FlowError::new(
            "OAuthFlowError",
            format!("invalid authorization endpoint {:?}: {e}", server.authorization_endpoint),
        )
    })?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("state", state)
        .append_pair("code_challenge", &pkce_challenge(verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", resource);
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_s256_of_the_verifier() {
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let v = random_text(64);
        assert_eq!(v.len(), 64);
        assert!(v.bytes().all(|b| UNRESERVED.contains(&b)));
    }

    #[test]
    fn the_authorization_url_carries_every_parameter() {
        let server = AuthServer {
            authorization_endpoint: "http://as/authorize?x=1".into(),
            token_endpoint: "http://as/token".into(),
            registration_endpoint: None,
        };
        let url = authorization_url(&server, "c 1", "http://localhost:5/callback", "st", "v", "http://h/mcp").unwrap();
        let parsed = Url::parse(&url).unwrap();
        let pairs: Vec<(String, String)> = parsed.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x"), Some("1"));
        assert_eq!(get("client_id"), Some("c 1"));
        assert_eq!(get("redirect_uri"), Some("http://localhost:5/callback"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("code_challenge"), Some(pkce_challenge("v").as_str()));
        assert_eq!(get("resource"), Some("http://h/mcp"));
        assert_eq!(get("response_type"), Some("code"));
        assert_eq!(get("state"), Some("st"));
    }

    #[test]
    fn a_stored_client_keeps_its_callback_port() {
        let info = json!({"redirect_uris": ["http://localhost:4242/callback"]});
        assert_eq!(callback_port(info.as_object().unwrap()), Some(4242));
        let other = json!({"redirect_uris": ["https://example.com/cb"]});
        assert_eq!(callback_port(other.as_object().unwrap()), None);
    }
}
