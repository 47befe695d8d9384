//! `vertexai` with Application Default Credentials (`docs/providers.md` §7.5): a service-account
//! file's signed JWT or an `authorized_user` file's refresh token, exchanged at a mock token
//! endpoint, then `Authorization: Bearer` on the project-scoped path of a mock Vertex endpoint.
//! The key is the committed test-only key (tests/fixtures/vertex/README.md).

use crate::common;
use crate::harness;
use crate::mock_llm;
use crate::mock_routes;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use harness::*;
use kiwi::config::{ProviderType, ThinkingEffort};
use kiwi::llm::ChatProvider;
use mock_llm::{MockLlm, MockResponse};
use mock_routes::{MockRoutes, Reply};
use serde_json::{Value, json};

const MODEL: &str = "gemini-2.5-pro";
const SSE: &str = "gemini-text.sse";

fn test_key() -> String {
    std::fs::read_to_string(mock_llm::fixtures_dir().join("../vertex/test-only-key.pem")).unwrap()
}

fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    path
}

fn service_account(token_uri: &str) -> Value {
    json!({
        "type": "service_account",
        "project_id": "sa-project",
        "private_key_id": "test-key-1",
        "private_key": test_key(),
        "client_email": "kiwi-test@sa-project.iam.gserviceaccount.com",
        "client_id": "1234",
        "token_uri": token_uri,
    })
}

fn token_reply(token: &str, expires_in: u64) -> Reply {
    Reply::json(200, json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"}))
}

/// A keyless `vertexai` provider whose env table holds `env`.
fn vertex(mock: &MockLlm, env: &[(&str, &str)]) -> Arc<dyn ChatProvider> {
    let mut s = settings(ProviderType::VertexAi, &mock.base_url(), MODEL, ThinkingEffort::Off);
    s.provider.api_key.clear();
    for (k, v) in env {
        s.provider.env.insert(k.to_string(), v.to_string());
    }
    provider(&s)
}

fn form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            let v = percent_decode(v);
            (k.to_string(), v)
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn field<'a>(form: &'a [(String, String)], key: &str) -> &'a str {
    form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no {key} in {form:?}"))
}

#[tokio::test]
async fn a_service_account_signs_a_jwt_and_sends_the_token_as_bearer() {
    let tokens = MockRoutes::start();
    tokens.on("POST /token", token_reply("ya29.mock-access", 3600));
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let dir = tempfile::tempdir().unwrap();
    let token_uri = format!("{}/token", tokens.url());
    let file = write_json(dir.path(), "sa.json", &service_account(&token_uri));
    let p = vertex(
        &mock,
        &[
            ("GOOGLE_APPLICATION_CREDENTIALS", file.to_str().unwrap()),
            ("GOOGLE_CLOUD_PROJECT", "env-project"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1"),
        ],
    );
    for _ in 0..2 {
        let outcome = run_hi(p.as_ref()).await;
        assert_matches_expected(&outcome, &expected(SSE, "gemini"));
    }

    // One exchange serves both requests (the token is cached until near its expiry).
    let exchanges = tokens.requests_to("POST /token");
    assert_eq!(exchanges.len(), 1);
    let sent = form(&exchanges[0].body_text());
    assert_eq!(exchanges[0].header("content-type"), Some("application/x-www-form-urlencoded"));
    assert_eq!(field(&sent, "grant_type"), "urn:ietf:params:oauth:grant-type:jwt-bearer");
    let jwt = field(&sent, "assertion");
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header: Value = serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
    assert_eq!(header, json!({"alg": "RS256", "typ": "JWT", "kid": "test-key-1"}));
    let claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(claims["iss"], "kiwi-test@sa-project.iam.gserviceaccount.com");
    assert_eq!(claims["aud"], token_uri);
    assert_eq!(claims["scope"], "https://www.googleapis.com/auth/cloud-platform");
    assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 3600);
    // The signature verifies with the key's public half.
    let pem = test_key();
    let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(der).unwrap();
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    let public = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        ring::signature::KeyPair::public_key(&pair).as_ref().to_vec(),
    );
    public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &b64.decode(parts[2]).unwrap()).unwrap();

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.path,
            format!(
                "/v1beta1/projects/env-project/locations/us-central1/publishers/google/models/{MODEL}:streamGenerateContent"
            )
        );
        assert_eq!(r.query, "alt=sse");
        assert_eq!(r.header("authorization"), Some("Bearer ya29.mock-access"));
        assert_eq!(r.header("x-goog-api-key"), None);
        assert_eq!(r.header("x-goog-user-project"), None);
    }
}

#[tokio::test]
async fn a_token_near_its_expiry_is_replaced_and_the_files_project_is_the_fallback() {
    let tokens = MockRoutes::start();
    tokens.on("POST /token", token_reply("ya29.first", 2)).on("POST /token", token_reply("ya29.second", 3600));
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let dir = tempfile::tempdir().unwrap();
    let file = write_json(dir.path(), "sa.json", &service_account(&format!("{}/token", tokens.url())));
    let p = vertex(&mock, &[("GOOGLE_APPLICATION_CREDENTIALS", file.to_str().unwrap())]);
    // A 2-second token is refreshed at half its life: wait that out between the calls.
    run_hi(p.as_ref()).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    run_hi(p.as_ref()).await;
    run_hi(p.as_ref()).await;
    assert_eq!(tokens.requests_to("POST /token").len(), 2);
    let auth: Vec<_> = mock.requests().iter().map(|r| r.header("authorization").unwrap().to_string()).collect();
    assert_eq!(auth, ["Bearer ya29.first", "Bearer ya29.second", "Bearer ya29.second"]);
    // No GOOGLE_CLOUD_PROJECT: the service account's project; no location: `global`.
    assert_eq!(
        mock.requests()[0].path,
        format!("/v1beta1/projects/sa-project/locations/global/publishers/google/models/{MODEL}:streamGenerateContent")
    );
}

#[tokio::test]
async fn an_authorized_user_file_at_the_gcloud_location_refreshes_its_token() {
    let tokens = MockRoutes::start();
    tokens.on("POST /oauth/token", token_reply("ya29.user", 3600));
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let home = tempfile::tempdir().unwrap();
    let gcloud = home.path().join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    write_json(
        &gcloud,
        "application_default_credentials.json",
        &json!({"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com", "client_secret": "s3cret",
            "refresh_token": "1//refresh", "quota_project_id": "billing-proj",
            "token_uri": format!("{}/oauth/token", tokens.url())}),
    );
    let p = vertex(&mock, &[("HOME", home.path().to_str().unwrap()), ("GOOGLE_CLOUD_PROJECT", "user-proj")]);
    let outcome = run_hi(p.as_ref()).await;
    assert_matches_expected(&outcome, &expected(SSE, "gemini"));
    let exchanges = tokens.requests_to("POST /oauth/token");
    assert_eq!(exchanges.len(), 1);
    let sent = form(&exchanges[0].body_text());
    assert_eq!(
        sent,
        [
            ("grant_type".to_string(), "refresh_token".to_string()),
            ("client_id".to_string(), "cid.apps.googleusercontent.com".to_string()),
            ("client_secret".to_string(), "s3cret".to_string()),
            ("refresh_token".to_string(), "1//refresh".to_string()),
        ]
    );
    let r = &mock.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer ya29.user"));
    assert_eq!(r.header("x-goog-user-project"), Some("billing-proj"));
    assert!(r.path.starts_with("/v1beta1/projects/user-proj/locations/global/"), "{}", r.path);
}

#[tokio::test]
async fn a_configured_key_keeps_express_mode_and_an_env_project_beats_an_env_key() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.json");
    // A configured key: express mode, whatever the environment says.
    let mut s = settings(ProviderType::VertexAi, &mock.base_url(), MODEL, ThinkingEffort::Off);
    s.provider.env.insert("GOOGLE_APPLICATION_CREDENTIALS".into(), missing.to_str().unwrap().into());
    s.provider.env.insert("GOOGLE_CLOUD_PROJECT".into(), "p".into());
    run_hi(provider(&s).as_ref()).await;
    // A key from the environment without a project: express mode too.
    let env_key = vertex(&mock, &[("GOOGLE_API_KEY", "env-key")]);
    run_hi(env_key.as_ref()).await;
    let requests = mock.requests();
    assert_eq!(requests[0].header("x-goog-api-key"), Some("sk-mock-key"));
    assert_eq!(requests[1].header("x-goog-api-key"), Some("env-key"));
    for r in &requests {
        assert_eq!(r.path, format!("/v1beta1/publishers/google/models/{MODEL}:streamGenerateContent"));
        assert_eq!(r.header("authorization"), None);
    }
    // A key and a project both from the environment: the project (and so ADC) wins.
    let adc = vertex(
        &mock,
        &[
            ("GOOGLE_API_KEY", "env-key"),
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GOOGLE_APPLICATION_CREDENTIALS", missing.to_str().unwrap()),
        ],
    );
    let outcome = run_hi(adc.as_ref()).await;
    assert!(outcome.error.unwrap().to_string().contains("the file does not exist"));
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn bad_credentials_fail_the_request_with_their_cause() {
    let tokens = MockRoutes::start();
    tokens.on(
        "POST /token",
        Reply::json(400, json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."})),
    );
    tokens.on("POST /empty", Reply::json(200, json!({"token_type": "Bearer"})));
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(path("broken.json"), "{\"type\": \"service_account\",").unwrap();
    let mut bad_key = service_account(&format!("{}/token", tokens.url()));
    bad_key["private_key"] = Value::from(test_key().replacen("MII", "MIA", 1));
    write_json(dir.path(), "badkey.json", &bad_key);
    write_json(dir.path(), "refused.json", &service_account(&format!("{}/token", tokens.url())));
    write_json(dir.path(), "empty.json", &service_account(&format!("{}/empty", tokens.url())));
    write_json(dir.path(), "down.json", &service_account("http://127.0.0.1:9/token"));
    let cases = [
        ("missing.json", "the file does not exist (set GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON file, or set an API key)".to_string()),
        ("broken.json", "the file is not valid JSON: EOF while parsing a value at line 1 column 27".to_string()),
        ("badkey.json", "the private_key is unusable: not a valid RSA private key (InvalidEncoding)".to_string()),
        (
            "refused.json",
            format!("the token endpoint {}/token refused them: HTTP 400 invalid_grant: Invalid JWT Signature.", tokens.url()),
        ),
        ("empty.json", format!("the token endpoint {}/empty answered without an access_token", tokens.url())),
    ];
    for (name, cause) in cases {
        let p = vertex(&mock, &[("GOOGLE_APPLICATION_CREDENTIALS", &path(name)), ("GOOGLE_CLOUD_PROJECT", "p")]);
        let outcome = run_hi(p.as_ref()).await;
        let error = outcome.error.expect(name);
        assert_eq!(error.to_string(), format!("Vertex AI credentials {}: {cause}", path(name)), "{name}");
        assert!(!error.is_retryable(), "{name}");
    }
    // An unreachable token endpoint is a connection error (retried by the turn).
    let p = vertex(&mock, &[("GOOGLE_APPLICATION_CREDENTIALS", &path("down.json")), ("GOOGLE_CLOUD_PROJECT", "p")]);
    let error = run_hi(p.as_ref()).await.error.unwrap();
    assert!(error.is_retryable());
    assert!(
        error.to_string().starts_with(&format!(
            "Vertex AI credentials {}: cannot reach the token endpoint http://127.0.0.1:9/token: ",
            path("down.json")
        )),
        "{error}"
    );
    // Nothing reached Vertex.
    assert_eq!(mock.request_count(), 0);
}

/// Over the wire: the start-up check names a missing file on stderr, and the prompt's error and
/// the log say the same.
#[test]
fn a_missing_credentials_file_is_named_at_start_up_and_in_the_prompt_error() {
    let env = common::Env::new();
    let missing = env.dir.path().join("sa.json");
    let config = env.dir.path().join("c.json");
    let text = json!({"default_model": "v",
        "models": {"v": {"provider": "g", "model": MODEL, "max_context_size": 100000}},
        "providers": {"g": {"type": "vertexai", "base_url": "http://127.0.0.1:9",
            "env": {"GOOGLE_APPLICATION_CREDENTIALS": missing.to_str().unwrap(), "GOOGLE_CLOUD_PROJECT": "p"}}}});
    std::fs::write(&config, text.to_string()).unwrap();
    let mut cmd = env.command(&config, &["--log-stderr"]);
    cmd.env("KIWI_LOG", "warn");
    for var in ["GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"] {
        cmd.env_remove(var);
    }
    let (stderr, answer) = common::prompt_once(cmd);
    let line = format!(
        "Vertex AI credentials {}: the file does not exist (set GOOGLE_APPLICATION_CREDENTIALS to a service-account JSON file, or set an API key)",
        missing.display()
    );
    assert!(stderr.lines().any(|l| l == format!("kiwi: warning: {line}")), "{stderr}");
    assert!(stderr.lines().any(|l| l.contains("ERROR") && l.ends_with(&line)), "{stderr}");
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    assert_eq!(answer["error"]["message"], line);
}

#[tokio::test]
async fn concurrent_requests_share_one_exchange_and_a_missing_project_is_named() {
    let tokens = MockRoutes::start();
    tokens.on("POST /token", token_reply("ya29.shared", 3600));
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(SSE));
    let dir = tempfile::tempdir().unwrap();
    let file = write_json(dir.path(), "sa.json", &service_account(&format!("{}/token", tokens.url())));
    let p = vertex(&mock, &[("GOOGLE_APPLICATION_CREDENTIALS", file.to_str().unwrap())]);
    let (a, b, c) = tokio::join!(run_hi(p.as_ref()), run_hi(p.as_ref()), run_hi(p.as_ref()));
    for outcome in [a, b, c] {
        assert!(outcome.error.is_none(), "{:?}", outcome.error);
    }
    assert_eq!(tokens.requests_to("POST /token").len(), 1);
    assert_eq!(mock.request_count(), 3);

    // A user's login names no project: without GOOGLE_CLOUD_PROJECT nothing is sent.
    let user = write_json(
        dir.path(),
        "user.json",
        &json!({"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r",
            "token_uri": format!("{}/token", tokens.url())}),
    );
    let p = vertex(&mock, &[("GOOGLE_APPLICATION_CREDENTIALS", user.to_str().unwrap())]);
    let error = run_hi(p.as_ref()).await.error.unwrap();
    assert_eq!(
        error.to_string(),
        "Vertex AI without an API key needs a project: set GOOGLE_CLOUD_PROJECT (or use a service-account file, which names its project_id)"
    );
    assert_eq!(mock.request_count(), 3);
}
