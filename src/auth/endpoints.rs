//! The Kimi account's HTTP endpoints (`docs/subcommands.md` §3.1–§3.3, §3.8): device
//! authorization, token polling, token refresh, and the platform's model list.
//!
//! Invariants:
//! * bodies are `application/x-www-form-urlencoded`, no `scope` is ever sent, and answers are
//!   read as JSON whatever their content type;
//! * the device, polling and refresh requests carry the `X-Msh-*` device headers (the same ones
//!   the Kimi chat provider sends); the model list carries only the bearer token;
//! * every request has a deadline, so a silent server fails a login or a refresh instead of
//!   hanging it;
//! * no token, device code or request body is ever logged.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::credential::{Credential, now_epoch};

/// The OAuth client id of Kimi Code (the reference's, so the account server accepts us).
pub const CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
const DEFAULT_OAUTH_HOST: &str = "https://auth.kimi.com";
const DEFAULT_PLATFORM_BASE_URL: &str = "https://api.kimi.com/coding/v1";
const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Per-request deadline: generous for a slow account server, short enough for a person waiting.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Waits before the 2nd and 3rd refresh attempt (§3.8).
const REFRESH_WAITS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(2)];

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `$KIMI_CODE_OAUTH_HOST`, else `$KIMI_OAUTH_HOST`, else the public host; no trailing `/`.
pub fn oauth_host() -> String {
    let host = env_nonempty("KIMI_CODE_OAUTH_HOST")
        .or_else(|| env_nonempty("KIMI_OAUTH_HOST"))
        .unwrap_or_else(|| DEFAULT_OAUTH_HOST.to_string());
    host.trim().trim_end_matches('/').to_string()
}

/// `$KIMI_CODE_BASE_URL`, else the public Kimi Code API.
pub fn platform_base_url() -> String {
    env_nonempty("KIMI_CODE_BASE_URL").unwrap_or_else(|| DEFAULT_PLATFORM_BASE_URL.to_string()).trim().to_string()
}

/// `<base>/<path>` with exactly one `/` between them.
pub fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

pub fn client() -> Result<reqwest::Client, String> {
    crate::net::client_builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

fn device_headers() -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in crate::llm::providers::identity::msh_headers() {
        // The values are ASCII by construction; one that still fails is left out, not fatal.
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(&value)) {
            map.insert(n, v);
        }
    }
    map
}

/// `application/x-www-form-urlencoded` like Python's `urlencode`: unreserved characters kept,
/// space as `+`, everything else percent-encoded.
pub fn form_encode(pairs: &[(&str, &str)]) -> String {
    fn encode(s: &str, out: &mut String) {
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
    }
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode(k, &mut out);
        out.push('=');
        encode(v, &mut out);
    }
    out
}

/// A form POST's answer: the status and the body as JSON (`None` when it is not JSON).
struct Answer {
    status: u16,
    json: Option<Value>,
}

async fn post_form(client: &reqwest::Client, url: &str, pairs: &[(&str, &str)]) -> Result<Answer, reqwest::Error> {
    let response = client
        .post(url)
        .headers(device_headers())
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form_encode(pairs))
        .send()
        .await?;
    let status = response.status().as_u16();
    let body = response.bytes().await?;
    Ok(Answer { status, json: serde_json::from_slice(&body).ok() })
}

fn member<'a>(json: &'a Option<Value>, name: &str) -> Option<&'a str> {
    json.as_ref()?.get(name)?.as_str()
}

/// The device authorization's answer (§3.3 step 2).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceAuthorization {
    pub user_code: String,
    pub device_code: String,
    pub verification_uri_complete: String,
    /// Seconds between polls (default 5, at least 1).
    pub interval: u64,
}

/// Starts a device login. The error text follows `Login failed: `.
pub async fn device_authorization(client: &reqwest::Client) -> Result<DeviceAuthorization, String> {
    let url = join(&oauth_host(), "api/oauth/device_authorization");
    let answer = post_form(client, &url, &[("client_id", CLIENT_ID)]).await.map_err(|e| crate::net::error_text(&e))?;
    if answer.status != 200 {
        let shown = match &answer.json {
            Some(v) => crate::llm::providers::pyrepr::repr(v),
            None => format!("HTTP {}", answer.status),
        };
        return Err(format!("Device authorization failed: {shown}"));
    }
    let text = |name: &str| member(&answer.json, name).filter(|s| !s.is_empty()).map(str::to_string);
    let (Some(user_code), Some(device_code), Some(verification_uri_complete)) =
        (text("user_code"), text("device_code"), text("verification_uri_complete"))
    else {
        return Err("Device authorization failed: the answer lacks user_code, device_code or \
                    verification_uri_complete."
            .to_string());
    };
    let interval = answer
        .json
        .as_ref()
        .and_then(|v| v.get("interval"))
        .and_then(|v| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok())))
        .filter(|f| f.is_finite())
        .map_or(5, |f| f.clamp(1.0, 3600.0) as u64);
    Ok(DeviceAuthorization { user_code, device_code, verification_uri_complete, interval })
}

/// One poll of the token endpoint (§3.3 step 4).
#[derive(Debug, Clone, PartialEq)]
pub enum Poll {
    Granted(Credential),
    /// The device code expired: the whole login starts over.
    Expired,
    /// Not yet (`authorization_pending`, `slow_down`, `access_denied`, …): poll again.
    Waiting {
        error: String,
        description: String,
    },
}

/// Polls once. The error text follows `Login failed: ` and ends the login.
pub async fn poll_token(client: &reqwest::Client, device_code: &str) -> Result<Poll, String> {
    let url = join(&oauth_host(), "api/oauth/token");
    let pairs = [("client_id", CLIENT_ID), ("device_code", device_code), ("grant_type", DEVICE_CODE_GRANT)];
    let answer = match post_form(client, &url, &pairs).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %crate::net::error_text(&e), "token polling request failed");
            return Err("Token polling request failed.".to_string());
        }
    };
    if answer.status >= 500 {
        return Err(format!("Token polling server error: {}.", answer.status));
    }
    let Some(Value::Object(obj)) = &answer.json else {
        return Err("Unexpected token polling response.".to_string());
    };
    if answer.status == 200 && obj.contains_key("access_token") {
        return Credential::from_token_response(obj, now_epoch())
            .map(Poll::Granted)
            .ok_or_else(|| "Unexpected token polling response.".to_string());
    }
    let error = obj.get("error").and_then(Value::as_str).unwrap_or_default().to_string();
    if error == "expired_token" {
        return Ok(Poll::Expired);
    }
    let description = obj.get("error_description").and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(Poll::Waiting { error, description })
}

/// Why a refresh failed.
#[derive(Debug, Clone, PartialEq)]
pub enum RefreshFailure {
    /// 401/403: the refresh token is no good (the text is the server's or ours).
    Rejected(String),
    /// Anything else, after the retries the spec allows.
    Failed(String),
}

/// `POST <host>/api/oauth/token` with the refresh grant: 3 attempts for 429/5xx/network
/// errors, 1 s then 2 s apart (§3.8).
pub async fn refresh(refresh_token: &str) -> Result<Credential, RefreshFailure> {
    let client = client().map_err(RefreshFailure::Failed)?;
    let url = join(&oauth_host(), "api/oauth/token");
    let pairs = [("client_id", CLIENT_ID), ("grant_type", "refresh_token"), ("refresh_token", refresh_token)];
    for attempt in 0..=REFRESH_WAITS.len() {
        if attempt > 0 {
            tokio::time::sleep(REFRESH_WAITS[attempt - 1]).await;
        }
        let answer = match post_form(&client, &url, &pairs).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(attempt = attempt + 1, error = %crate::net::error_text(&e), "token refresh request failed");
                continue;
            }
        };
        let description = member(&answer.json, "error_description").filter(|s| !s.is_empty()).map(str::to_string);
        match answer.status {
            200 => {
                return match &answer.json {
                    Some(Value::Object(obj)) => Credential::from_token_response(obj, now_epoch())
                        .ok_or_else(|| RefreshFailure::Failed("Token refresh returned an incomplete token.".into())),
                    _ => Err(RefreshFailure::Failed("Token refresh returned no JSON object.".into())),
                };
            }
            401 | 403 => {
                return Err(RefreshFailure::Rejected(
                    description.unwrap_or_else(|| "Token refresh unauthorized.".to_string()),
                ));
            }
            429 | 500 | 502 | 503 | 504 => {
                tracing::warn!(attempt = attempt + 1, status = answer.status, "token refresh failed; retrying");
            }
            status => {
                return Err(RefreshFailure::Failed(
                    description.unwrap_or_else(|| format!("Token refresh failed (HTTP {status}).")),
                ));
            }
        }
    }
    Err(RefreshFailure::Failed("Token refresh failed after retries.".to_string()))
}

/// One model of the platform's list (§3.5).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemoteModel {
    pub id: String,
    pub context_length: u64,
    pub supports_reasoning: bool,
    pub supports_image_in: bool,
    pub supports_video_in: bool,
    pub display_name: Option<String>,
}

/// `GET <base>/models` with the access token. The error text follows `Failed to get models: `.
pub async fn list_models(
    client: &reqwest::Client,
    base_url: &str,
    access_token: &str,
) -> Result<Vec<RemoteModel>, String> {
    let url = join(base_url, "models");
    let response = client
        .get(&url)
        .header("Authorization", format!("Bearer {access_token}"))
        .send()
        .await
        .map_err(|e| crate::net::error_text(&e))?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|e| crate::net::error_text(&e))?;
    if status != 200 {
        return Err(format!("{url} answered HTTP {status}"));
    }
    let json: Value = serde_json::from_slice(&body).map_err(|_| format!("{url} did not answer with JSON"))?;
    let Some(data) = json.get("data").and_then(Value::as_array) else {
        return Err(format!("{url} answered without a `data` list"));
    };
    Ok(data.iter().filter_map(Value::as_object).filter_map(remote_model).collect())
}

/// Entries without a string `id` are skipped; missing numbers and flags are 0 / false.
fn remote_model(obj: &Map<String, Value>) -> Option<RemoteModel> {
    let id = obj.get("id").and_then(Value::as_str).filter(|s| !s.is_empty())?.to_string();
    let flag = |name: &str| obj.get(name).and_then(Value::as_bool).unwrap_or(false);
    let context_length = obj
        .get("context_length")
        .and_then(|v| v.as_u64().or_else(|| v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64)))
        .unwrap_or(0);
    Some(RemoteModel {
        id,
        context_length,
        supports_reasoning: flag("supports_reasoning"),
        supports_image_in: flag("supports_image_in"),
        supports_video_in: flag("supports_video_in"),
        display_name: obj.get("display_name").and_then(Value::as_str).map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding_matches_urlencode() {
        assert_eq!(
            form_encode(&[("grant_type", DEVICE_CODE_GRANT), ("x", "a b&c=d/é")]),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&x=a+b%26c%3Dd%2F%C3%A9"
        );
    }

    #[test]
    fn model_entries() {
        let v = serde_json::json!({"id": "kimi-k2", "context_length": 262144, "supports_reasoning": true,
            "display_name": "K2"});
        let m = remote_model(v.as_object().unwrap()).unwrap();
        assert_eq!((m.id.as_str(), m.context_length, m.supports_reasoning), ("kimi-k2", 262144, true));
        assert_eq!(m.display_name.as_deref(), Some("K2"));
        for bad in [serde_json::json!({}), serde_json::json!({"id": 3}), serde_json::json!({"id": ""})] {
            assert!(remote_model(bad.as_object().unwrap()).is_none(), "{bad}");
        }
        let m = remote_model(serde_json::json!({"id": "m", "context_length": "x"}).as_object().unwrap()).unwrap();
        assert_eq!(m, RemoteModel { id: "m".into(), ..RemoteModel::default() });
    }

    #[test]
    fn joins() {
        assert_eq!(join("http://h/v1/", "models"), "http://h/v1/models");
        assert_eq!(join("http://h", "api/oauth/token"), "http://h/api/oauth/token");
    }
}
