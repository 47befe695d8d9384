//! Google Application Default Credentials for `vertexai` without an API key
//! (`docs/providers.md` §7.5): a service-account file (a JWT signed RS256, exchanged for an access
//! token at the file's `token_uri`) or an `authorized_user` file (a refresh-token grant).
//!
//! Invariants:
//! * the file is found as google-auth does: `GOOGLE_APPLICATION_CREDENTIALS`, else
//!   `application_default_credentials.json` in `CLOUDSDK_CONFIG` or `~/.config/gcloud`; each
//!   variable is read from the provider's `env` table first, then the process environment;
//! * the file is read when a token is needed, never when the provider is built, so a broken file
//!   never stops kiwi from starting: the request fails with one line naming the file and the cause
//!   (also logged), and start-up diagnostics check the same thing without any network
//!   ([`check_credentials`]);
//! * one token is cached until [`REFRESH_MARGIN`] before it expires; concurrent requests wait for
//!   one exchange instead of starting their own;
//! * the private key, the assertion and the tokens never reach a log line.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde::Deserialize;
use serde_json::Value;

use crate::llm::ChatError;
use crate::llm::settings::LlmSettings;

/// The scope Vertex AI needs.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's token endpoint, for files that name none.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// A token is replaced this long before it expires (or at half its life when that is shorter).
const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// The lifetime asked for in a service account's assertion (Google's maximum).
const ASSERTION_LIFETIME_SECS: u64 = 3600;
/// How long one token exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Form encoding keeps only the unreserved characters.
const FORM: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// What a request needs from the credentials.
#[derive(Clone)]
pub(crate) struct Grant {
    pub access_token: String,
    /// The service account's `project_id`, for when no `GOOGLE_CLOUD_PROJECT` is set.
    pub project: Option<String>,
    /// An `authorized_user` file's `quota_project_id`, sent as `x-goog-user-project`.
    pub quota_project: Option<String>,
}

struct Cached {
    grant: Grant,
    refresh_at: Instant,
}

/// Access tokens for one provider, fetched on demand and cached.
pub(crate) struct AdcTokens {
    client: reqwest::Client,
    /// `None`: no file was named and no home directory is known.
    file: Option<PathBuf>,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

/// The credentials file this provider would use.
pub(crate) fn credentials_path(settings: &LlmSettings) -> Option<PathBuf> {
    let var = |name: &str| settings.env_var(name).filter(|v| !v.is_empty());
    if let Some(file) = var("GOOGLE_APPLICATION_CREDENTIALS") {
        return Some(PathBuf::from(file));
    }
    let config_dir = match var("CLOUDSDK_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(var("HOME")?).join(".config").join("gcloud"),
    };
    Some(config_dir.join("application_default_credentials.json"))
}

/// Checks the credentials file without any network: found, JSON, a supported type, a usable key.
/// The error is one line naming the file and the cause.
pub fn check_credentials(settings: &LlmSettings) -> Result<(), String> {
    let file = credentials_path(settings).ok_or_else(no_file_message)?;
    load(&file).map(drop).map_err(|cause| message(&file, &cause))
}

fn no_file_message() -> String {
    "Vertex AI credentials: none found (no GOOGLE_APPLICATION_CREDENTIALS and no home directory); set \
     GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON file, or set an API key"
        .to_string()
}

fn message(file: &Path, cause: &str) -> String {
    format!("Vertex AI credentials {}: {cause}", file.display())
}

impl AdcTokens {
    pub fn new(client: reqwest::Client, settings: &LlmSettings) -> Self {
        Self { client, file: credentials_path(settings), cache: tokio::sync::Mutex::new(None) }
    }

    /// A valid token: the cached one, or a fresh one from the token endpoint.
    pub async fn grant(&self) -> Result<Grant, ChatError> {
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && Instant::now() < cached.refresh_at
        {
            return Ok(cached.grant.clone());
        }
        let result = self.fetch().await;
        let (grant, lifetime) = result.inspect_err(|e| tracing::error!("{e}"))?;
        let margin = REFRESH_MARGIN.min(lifetime / 2);
        *cache = Some(Cached { grant: grant.clone(), refresh_at: Instant::now() + lifetime - margin });
        Ok(grant)
    }

    async fn fetch(&self) -> Result<(Grant, Duration), ChatError> {
        let file = self.file.as_deref().ok_or_else(|| ChatError::Other(no_file_message()))?;
        let fail = |cause: String| ChatError::Other(message(file, &cause));
        let credentials = load(file).map_err(fail)?;
        let (token_uri, form) = credentials.token_request().map_err(fail)?;
        let response = self
            .client
            .post(&token_uri)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(EXCHANGE_TIMEOUT)
            .body(form)
            .send()
            .await
            .map_err(|e| {
                ChatError::Connection(message(
                    file,
                    &format!("cannot reach the token endpoint {}: {}", redacted_uri(&token_uri), transport_cause(&e)),
                ))
            })?;
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if !(200..300).contains(&status) {
            let refusal = json.as_ref().map(refusal_text).unwrap_or_default();
            return Err(fail(format!(
                "the token endpoint {} refused them: HTTP {status}{refusal}",
                redacted_uri(&token_uri)
            )));
        }
        let token: TokenAnswer = json
            .and_then(|v| serde_json::from_value(v).ok())
            .filter(|t: &TokenAnswer| !t.access_token.is_empty())
            .ok_or_else(|| {
                fail(format!("the token endpoint {} answered without an access_token", redacted_uri(&token_uri)))
            })?;
        let lifetime = Duration::from_secs(token.expires_in.unwrap_or(ASSERTION_LIFETIME_SECS));
        let grant = Grant {
            access_token: token.access_token,
            project: credentials.project_id.clone(),
            quota_project: credentials.quota_project_id.clone(),
        };
        Ok((grant, lifetime))
    }
}

/// ` invalid_grant: Invalid JWT Signature.` from an OAuth error body.
fn refusal_text(v: &Value) -> String {
    let error = match v.get("error") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o.get("status").or(o.get("message")).and_then(Value::as_str),
        _ => None,
    };
    let description = v.get("error_description").and_then(Value::as_str);
    match (error, description) {
        (Some(e), Some(d)) => format!(" {e}: {d}"),
        (Some(e), None) => format!(" {e}"),
        (None, Some(d)) => format!(" {d}"),
        (None, None) => String::new(),
    }
}

fn redacted_uri(uri: &str) -> String {
    crate::llm::settings::loggable_url(uri)
}

fn transport_cause(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_string();
    }
    let mut text = e.to_string();
    if let Some(source) = std::error::Error::source(e) {
        text = format!("{text} ({source})");
    }
    if let Some(query) = e.url().and_then(|u| u.query()) {
        text = text.replace(query, "<redacted>");
    }
    text
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: String,
    expires_in: Option<u64>,
}

// ----- the credentials file -----------------------------------------------------------------------

#[derive(Deserialize)]
struct RawFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    project_id: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
    quota_project_id: Option<String>,
}

enum Kind {
    ServiceAccount { email: String, key: Box<RsaKeyPair>, key_id: Option<String> },
    AuthorizedUser { client_id: String, client_secret: String, refresh_token: String },
}

struct Credentials {
    kind: Kind,
    token_uri: String,
    project_id: Option<String>,
    quota_project_id: Option<String>,
}

/// Reads and checks the file; the error is the cause alone.
fn load(file: &Path) -> Result<Credentials, String> {
    let text = std::fs::read(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "the file does not exist (set GOOGLE_APPLICATION_CREDENTIALS to a \
                                         service-account JSON file, or set an API key)"
            .to_string(),
        _ => format!("cannot read the file: {e}"),
    })?;
    parse(&text)
}

fn parse(text: &[u8]) -> Result<Credentials, String> {
    let raw: RawFile = serde_json::from_slice(text).map_err(|e| format!("the file is not valid JSON: {e}"))?;
    let required = |value: Option<String>, key: &str| {
        value.filter(|v| !v.is_empty()).ok_or_else(|| format!("the file has no \"{key}\""))
    };
    let kind = match raw.kind.as_deref() {
        Some("service_account") => {
            let email = required(raw.client_email, "client_email")?;
            let pem = required(raw.private_key, "private_key")?;
            let key = private_key(&pem).map_err(|cause| format!("the private_key is unusable: {cause}"))?;
            Kind::ServiceAccount { email, key: Box::new(key), key_id: raw.private_key_id.filter(|k| !k.is_empty()) }
        }
        Some("authorized_user") => Kind::AuthorizedUser {
            client_id: required(raw.client_id, "client_id")?,
            client_secret: required(raw.client_secret, "client_secret")?,
            refresh_token: required(raw.refresh_token, "refresh_token")?,
        },
        Some(other) => {
            return Err(format!(
                "credentials of type \"{other}\" are not supported (kiwi reads \"service_account\" and \
                 \"authorized_user\" files)"
            ));
        }
        None => return Err("the file has no \"type\"".to_string()),
    };
    Ok(Credentials {
        kind,
        token_uri: raw.token_uri.filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_TOKEN_URI.to_string()),
        project_id: raw.project_id.filter(|p| !p.is_empty()),
        quota_project_id: raw.quota_project_id.filter(|p| !p.is_empty()),
    })
}

/// An RSA key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what Google issues) or PKCS#1.
fn private_key(pem: &str) -> Result<RsaKeyPair, String> {
    let (label, der) = pem_block(pem)?;
    let parsed = match label.as_str() {
        "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
        "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
        other => return Err(format!("a PEM block \"{other}\" is not an RSA private key")),
    };
    parsed.map_err(|e| format!("not a valid RSA private key ({e})"))
}

/// The label and the bytes of the first PEM block.
fn pem_block(pem: &str) -> Result<(String, Vec<u8>), String> {
    let start = pem.find("-----BEGIN ").ok_or("no PEM \"-----BEGIN\" line")?;
    let rest = &pem[start + "-----BEGIN ".len()..];
    let label_end = rest.find("-----").ok_or("a broken PEM \"-----BEGIN\" line")?;
    let label = rest[..label_end].to_string();
    let body = &rest[label_end + 5..];
    let end_line = format!("-----END {label}-----");
    let body_end = body.find(&end_line).ok_or_else(|| format!("no PEM \"{end_line}\" line"))?;
    let b64: String = body[..body_end].chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| format!("bad PEM base64 ({e})"))?;
    Ok((label, der))
}

impl Credentials {
    /// The token endpoint and the form to post there.
    fn token_request(&self) -> Result<(String, String), String> {
        let pairs: Vec<(&str, String)> = match &self.kind {
            Kind::ServiceAccount { email, key, key_id } => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
                let assertion = assertion(key, email, key_id.as_deref(), &self.token_uri, now)?;
                vec![
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string()),
                    ("assertion", assertion),
                ]
            }
            Kind::AuthorizedUser { client_id, client_secret, refresh_token } => vec![
                ("grant_type", "refresh_token".to_string()),
                ("client_id", client_id.clone()),
                ("client_secret", client_secret.clone()),
                ("refresh_token", refresh_token.clone()),
            ],
        };
        let form =
            pairs.iter().map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, FORM))).collect::<Vec<_>>().join("&");
        Ok((self.token_uri.clone(), form))
    }
}

/// The signed JWT a service account trades for an access token (RFC 7523).
fn assertion(key: &RsaKeyPair, email: &str, key_id: Option<&str>, audience: &str, now: u64) -> Result<String, String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = key_id {
        header["kid"] = Value::from(kid);
    }
    let claims = serde_json::json!({
        "iss": email,
        "scope": SCOPE,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME_SECS,
    });
    let signing_input = format!("{}.{}", b64.encode(header.to_string()), b64.encode(claims.to_string()));
    let mut signature = vec![0u8; key.public().modulus_len()];
    key.sign(&RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), signing_input.as_bytes(), &mut signature)
        .map_err(|_| "the private_key cannot sign".to_string())?;
    Ok(format!("{signing_input}.{}", b64.encode(signature)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = include_str!("../../../tests/fixtures/vertex/test-only-key.pem");

    fn service_account(key: &str) -> String {
        serde_json::json!({"type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com",
            "private_key": key, "private_key_id": "kid-1", "token_uri": "http://127.0.0.1:9/token",
            "project_id": "p"})
        .to_string()
    }

    #[test]
    fn a_service_account_signs_a_verifiable_assertion() {
        let creds = parse(service_account(KEY).as_bytes()).unwrap();
        let Kind::ServiceAccount { key, .. } = &creds.kind else { panic!("service account") };
        let jwt = assertion(key, "sa@x", Some("kid-1"), "http://t/token", 1_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header: Value = serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": "kid-1"}));
        let claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({"iss": "sa@x", "scope": SCOPE, "aud": "http://t/token", "iat": 1000, "exp": 4600})
        );
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            key.public().as_ref().to_vec(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &b64.decode(parts[2]).unwrap()).unwrap();
        assert!(public.verify(b"other", &b64.decode(parts[2]).unwrap()).is_err());
    }

    #[test]
    fn bad_files_name_their_cause() {
        let err = |text: &str| parse(text.as_bytes()).err().unwrap();
        assert!(err("{").starts_with("the file is not valid JSON"));
        assert_eq!(err("{}"), "the file has no \"type\"");
        assert_eq!(
            err(r#"{"type":"external_account"}"#),
            "credentials of type \"external_account\" are not supported (kiwi reads \"service_account\" and \"authorized_user\" files)"
        );
        assert_eq!(err(r#"{"type":"service_account","private_key":"x"}"#), "the file has no \"client_email\"");
        assert_eq!(err(&service_account("not a pem")), "the private_key is unusable: no PEM \"-----BEGIN\" line");
        let broken = KEY.replacen("MII", "MIA", 1);
        assert!(err(&service_account(&broken)).starts_with("the private_key is unusable: not a valid RSA private key"));
        assert_eq!(err(r#"{"type":"authorized_user","client_id":"c"}"#), "the file has no \"client_secret\"");
    }

    #[test]
    fn authorized_users_post_a_refresh_grant() {
        let creds = parse(
            br#"{"type":"authorized_user","client_id":"c id","client_secret":"s&x","refresh_token":"1//r","quota_project_id":"q"}"#,
        )
        .unwrap();
        let (uri, form) = creds.token_request().unwrap();
        assert_eq!(uri, DEFAULT_TOKEN_URI);
        assert_eq!(form, "grant_type=refresh_token&client_id=c%20id&client_secret=s%26x&refresh_token=1%2F%2Fr");
        assert_eq!(creds.quota_project_id.as_deref(), Some("q"));
    }

    #[test]
    fn oauth_refusals_are_summarized() {
        let v = serde_json::json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."});
        assert_eq!(refusal_text(&v), " invalid_grant: Invalid JWT Signature.");
        assert_eq!(refusal_text(&serde_json::json!({"error": {"status": "PERMISSION_DENIED"}})), " PERMISSION_DENIED");
        assert_eq!(refusal_text(&serde_json::json!([])), "");
    }
}
