//! The Kimi account login against a mock account server, model list and chat endpoint on
//! 127.0.0.1 (`docs/subcommands.md` §3, §4): `kiwi login --json` / text, `logout`, `info`, and
//! wire sessions whose provider's key is a stored login (refresh before the turn, 401 → refresh
//! → retry → -32004, rejected refreshes, bad credential files, the search and fetch services).

use crate::common;
use crate::mock_routes;
use crate::npm;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Env, types};
use mock_routes::{MockRoutes, Reply};
use serde_json::{Value, json};

const CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
const DEVICE: &str = "POST /api/oauth/device_authorization";
const TOKEN: &str = "POST /api/oauth/token";
const MODELS: &str = "GET /coding/v1/models";
const CHAT: &str = "POST /coding/v1/chat/completions";
/// A proxy would route the mock's 127.0.0.1 through itself.
const PROXY_VARS: [&str; 6] = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];
const EXPIRED_MESSAGE: &str =
    "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again.";

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A `kiwi` subcommand with a clean environment pointed at the mock.
fn kiwi(env: &Env, mock: Option<&MockRoutes>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(args).env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share()).env("NO_COLOR", "1");
    // Nothing may open a real browser from a test.
    cmd.env("BROWSER", "true").env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    for var in ["KIMI_OAUTH_HOST", "KIMI_CODE_OAUTH_HOST", "KIMI_CODE_BASE_URL", "KIMI_API_KEY", "KIMI_BASE_URL"] {
        cmd.env_remove(var);
    }
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    if let Some(mock) = mock {
        cmd.env("KIMI_CODE_OAUTH_HOST", format!("{}/", mock.url()));
        cmd.env("KIMI_CODE_BASE_URL", format!("{}/coding/v1", mock.url()));
    }
    cmd
}

fn run(cmd: &mut Command) -> (i32, Vec<String>, String) {
    let Output { status, stdout, stderr } = cmd.output().expect("run kiwi");
    let out = String::from_utf8(stdout).unwrap().lines().map(str::to_string).collect();
    (status.code().unwrap_or(-1), out, String::from_utf8(stderr).unwrap())
}

fn device_reply(user_code: &str) -> Reply {
    Reply::json(
        200,
        json!({"user_code": user_code, "device_code": format!("dev-{user_code}"),
            "verification_uri": "http://verify.test/device",
            "verification_uri_complete": format!("http://verify.test/device?code={user_code}"),
            "expires_in": 600, "interval": 1}),
    )
}

fn token_reply(access: &str, refresh: &str) -> Reply {
    Reply::json(
        200,
        json!({"access_token": access, "refresh_token": refresh, "expires_in": 900,
            "scope": "kimi-code", "token_type": "Bearer"}),
    )
}

fn models_reply() -> Reply {
    Reply::json(
        200,
        json!({"data": [
            {"id": "kimi-for-coding", "context_length": 262144, "supports_reasoning": true,
             "supports_image_in": true, "display_name": "Kimi For Coding"},
            {"id": "plain-model", "context_length": 1000},
            {"context_length": 5}
        ]}),
    )
}

fn credential_path(env: &Env) -> PathBuf {
    env.share().join("credentials/kimi-code.json")
}

fn read_toml(path: &Path) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn json_lines(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

#[test]
fn login_json_writes_the_login_the_config_and_the_credential() {
    let env = Env::new();
    let mock = MockRoutes::start();
    mock.on(DEVICE, device_reply("ABCD"));
    mock.on(TOKEN, Reply::json(400, json!({"error": "authorization_pending", "error_description": " still waiting "})));
    mock.on(TOKEN, Reply::json(400, json!({"error": "slow_down", "error_description": "again"})));
    mock.on(TOKEN, token_reply("acc-1", "ref-1"));
    mock.on(MODELS, models_reply());
    let (code, out, err) = run(&mut kiwi(&env, Some(&mock), &["login", "--json"]));
    assert_eq!(code, 0, "{out:?} {err}");
    assert_eq!(err, "", "stderr stays empty");
    assert_eq!(
        out,
        [
            r#"{"type": "info", "message": "Please visit the following URL to finish authorization."}"#,
            r#"{"type": "verification_url", "message": "Verification URL: http://verify.test/device?code=ABCD", "data": {"verification_url": "http://verify.test/device?code=ABCD", "user_code": "ABCD"}}"#,
            r#"{"type": "waiting", "message": "Waiting for user authorization...: still waiting", "data": {"error": "authorization_pending", "error_description": " still waiting "}}"#,
            r#"{"type": "success", "message": "Logged in successfully."}"#,
        ]
    );

    // The requests: form bodies, device headers, the bearer token on the model list only.
    let device = &mock.requests_to(DEVICE)[0];
    assert_eq!(device.body_text(), format!("client_id={CLIENT_ID}"));
    assert_eq!(device.header("content-type"), Some("application/x-www-form-urlencoded"));
    assert_eq!(device.header("x-msh-platform"), Some("kimi_cli"));
    let polls = mock.requests_to(TOKEN);
    assert_eq!(polls.len(), 3);
    assert_eq!(
        polls[0].body_text(),
        format!(
            "client_id={CLIENT_ID}&device_code=dev-ABCD&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
        )
    );
    let device_id = std::fs::read_to_string(env.share().join("device_id")).unwrap();
    assert_eq!(polls[0].header("x-msh-device-id"), Some(device_id.trim()));
    let models = &mock.requests_to(MODELS)[0];
    assert_eq!(models.header("authorization"), Some("Bearer acc-1"));
    assert_eq!(models.header("x-msh-platform"), None);

    // The credential: one line, six members in order, mode 0600.
    let path = credential_path(&env);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains('\n'));
    assert!(text.starts_with(r#"{"access_token": "acc-1", "refresh_token": "ref-1", "expires_at": "#), "{text}");
    assert!(text.ends_with(r#", "scope": "kimi-code", "token_type": "Bearer", "expires_in": 900.0}"#), "{text}");
    let stored: Value = serde_json::from_str(&text).unwrap();
    let left = stored["expires_at"].as_f64().unwrap() - now();
    assert!(left > 0.0 && left <= 900.0, "{left}");

    // The config: the managed provider, its models, the default and the services.
    let config = read_toml(&env.share().join("config.toml"));
    let provider = &config["providers"]["managed:kimi-code"];
    assert_eq!(provider["type"].as_str(), Some("kimi"));
    assert_eq!(provider["base_url"].as_str(), Some(format!("{}/coding/v1", mock.url()).as_str()));
    assert_eq!(provider["api_key"].as_str(), Some(""));
    assert_eq!(provider["oauth"]["storage"].as_str(), Some("file"));
    assert_eq!(provider["oauth"]["key"].as_str(), Some("oauth/kimi-code"));
    assert_eq!(config["default_model"].as_str(), Some("kimi-code/kimi-for-coding"));
    assert_eq!(config["default_thinking"].as_bool(), Some(true));
    let k = &config["models"]["kimi-code/kimi-for-coding"];
    assert_eq!(k["provider"].as_str(), Some("managed:kimi-code"));
    assert_eq!(k["max_context_size"].as_integer(), Some(262144));
    assert_eq!(k["display_name"].as_str(), Some("Kimi For Coding"));
    let caps: Vec<&str> = k["capabilities"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(caps, ["thinking", "image_in"]);
    let plain = config["models"]["kimi-code/plain-model"].as_table().unwrap();
    assert!(!plain.contains_key("capabilities") && !plain.contains_key("display_name"), "{plain:?}");
    assert_eq!(config["models"].as_table().unwrap().len(), 2, "the entry without an id is skipped");
    let search = &config["services"]["moonshot_search"];
    assert_eq!(search["base_url"].as_str(), Some(format!("{}/coding/v1/search", mock.url()).as_str()));
    assert_eq!(search["oauth"]["key"].as_str(), Some("oauth/kimi-code"));
    let fetch = &config["services"]["moonshot_fetch"];
    assert_eq!(fetch["base_url"].as_str(), Some(format!("{}/coding/v1/fetch", mock.url()).as_str()));
}

#[test]
fn login_text_mode_restarts_on_an_expired_device_code() {
    let env = Env::new();
    let mock = MockRoutes::start();
    mock.on(DEVICE, device_reply("ONE")).on(DEVICE, device_reply("TWO"));
    mock.on(TOKEN, Reply::json(400, json!({"error": "expired_token", "error_description": "gone"})));
    mock.on(TOKEN, token_reply("acc-2", "ref-2"));
    mock.on(MODELS, models_reply());
    // A hand-written setting outside the managed entries survives the login.
    std::fs::create_dir_all(env.share()).unwrap();
    std::fs::write(env.share().join("config.toml"), "[loop_control]\nmax_steps_per_turn = 7\n").unwrap();
    let (code, out, err) = run(&mut kiwi(&env, Some(&mock), &["login"]));
    assert_eq!(code, 0, "{out:?} {err}");
    assert_eq!(
        out,
        [
            "Please visit the following URL to finish authorization.",
            "Verification URL: http://verify.test/device?code=ONE",
            "Device code expired, restarting login...",
            "Please visit the following URL to finish authorization.",
            "Verification URL: http://verify.test/device?code=TWO",
            "Logged in successfully.",
        ]
    );
    let polls = mock.requests_to(TOKEN);
    assert!(polls[1].body_text().contains("device_code=dev-TWO"), "the new device code is polled");
    let config = read_toml(&env.share().join("config.toml"));
    assert_eq!(config["loop_control"]["max_steps_per_turn"].as_integer(), Some(7));
    assert_eq!(config["default_model"].as_str(), Some("kimi-code/kimi-for-coding"));
}

/// One failing login: its exit code, stdout lines and whether the credential file exists.
fn failing_login(setup: impl FnOnce(&MockRoutes)) -> (Env, i32, Vec<String>) {
    let env = Env::new();
    let mock = MockRoutes::start();
    setup(&mock);
    let (code, out, err) = run(&mut kiwi(&env, Some(&mock), &["login", "--json"]));
    assert_eq!(err, "", "errors go to stdout in --json mode");
    (env, code, out)
}

fn last_error(out: &[String]) -> String {
    let last = json_lines(out).pop().expect("some output");
    assert_eq!(last["type"], "error", "{out:?}");
    assert!(last.get("data").is_none());
    last["message"].as_str().unwrap().to_string()
}

#[test]
fn login_errors_are_json_lines_and_exit_1() {
    let (_, code, out) = failing_login(|m| {
        m.on(DEVICE, Reply::json(400, json!({"error": "invalid_client", "error_description": "bad client"})));
    });
    assert_eq!(code, 1);
    assert_eq!(
        out,
        [
            r#"{"type": "error", "message": "Login failed: Device authorization failed: {'error': 'invalid_client', 'error_description': 'bad client'}"}"#
        ]
    );

    let (_, code, out) = failing_login(|m| {
        m.on(DEVICE, Reply::json(200, json!({"user_code": "U", "device_code": "D"})));
    });
    assert_eq!(code, 1);
    assert!(last_error(&out).starts_with("Login failed: Device authorization failed: "), "{out:?}");

    let (env, code, out) = failing_login(|m| {
        m.on(DEVICE, device_reply("A"));
        m.on(TOKEN, Reply::json(503, json!({"error": "busy"})));
    });
    assert_eq!(code, 1);
    assert_eq!(last_error(&out), "Login failed: Token polling server error: 503.");
    assert!(!credential_path(&env).exists());

    for body in [Reply::json(400, json!([1, 2])), Reply::text(400, "not json"), Reply::json(200, json!("x"))] {
        let (_, code, out) = failing_login(|m| {
            m.on(DEVICE, device_reply("A"));
            m.on(TOKEN, body);
        });
        assert_eq!(code, 1);
        assert_eq!(last_error(&out), "Login failed: Unexpected token polling response.");
    }

    // A granted token that lacks a required member is not saved.
    let (env, code, out) = failing_login(|m| {
        m.on(DEVICE, device_reply("A"));
        m.on(
            TOKEN,
            Reply::json(200, json!({"access_token": "a", "expires_in": 9, "scope": "", "token_type": "Bearer"})),
        );
    });
    assert_eq!(code, 1);
    assert_eq!(last_error(&out), "Login failed: Unexpected token polling response.");
    assert!(!credential_path(&env).exists());

    // The model list fails: the token is kept, the config is not touched.
    let (env, code, out) = failing_login(|m| {
        m.on(DEVICE, device_reply("A"));
        m.on(TOKEN, token_reply("acc", "ref"));
        m.on(MODELS, Reply::json(500, json!({"error": "down"})));
    });
    assert_eq!(code, 1);
    assert!(last_error(&out).starts_with("Failed to get models: "), "{out:?}");
    assert!(credential_path(&env).exists());
    let config = read_toml(&env.share().join("config.toml"));
    assert!(config["providers"].as_table().unwrap().is_empty(), "{config:?}");

    for models in [json!({"data": []}), json!({"data": [{"name": "no id"}]})] {
        let (env, code, out) = failing_login(|m| {
            m.on(DEVICE, device_reply("A"));
            m.on(TOKEN, token_reply("acc", "ref"));
            m.on(MODELS, Reply::json(200, models));
        });
        assert_eq!(code, 1);
        assert_eq!(last_error(&out), "No models available for the selected platform.");
        assert!(credential_path(&env).exists());
    }

    let (_, code, out) = failing_login(|m| {
        m.on(DEVICE, device_reply("A"));
        m.on(TOKEN, token_reply("acc", "ref"));
        m.on(MODELS, Reply::text(200, "<html>"));
    });
    assert_eq!(code, 1);
    assert!(last_error(&out).starts_with("Failed to get models: "), "{out:?}");

    // Nobody listening at the account host.
    let env = Env::new();
    let (code, out, err) =
        run(kiwi(&env, None, &["login", "--json"]).env("KIMI_CODE_OAUTH_HOST", "http://127.0.0.1:1"));
    assert_eq!((code, err.as_str()), (1, ""));
    assert!(last_error(&out).starts_with("Login failed: "), "{out:?}");

    // Text mode prints the error message itself.
    let env = Env::new();
    let (code, out, _) = run(kiwi(&env, None, &["login"]).env("KIMI_CODE_OAUTH_HOST", "http://127.0.0.1:1"));
    assert_eq!(code, 1);
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with("Login failed: "), "{out:?}");

    // A config that cannot be read fails the login before any request.
    let env = Env::new();
    let mock = MockRoutes::start();
    std::fs::create_dir_all(env.share()).unwrap();
    std::fs::write(env.share().join("config.toml"), "default_model = [").unwrap();
    let (code, out, _) = run(&mut kiwi(&env, Some(&mock), &["login", "--json"]));
    assert_eq!(code, 1);
    assert!(last_error(&out).starts_with("Login failed: Invalid TOML"), "{out:?}");
    assert!(mock.requests().is_empty());
}

#[test]
fn logout_removes_the_login_and_is_idempotent() {
    let env = Env::new();
    let mock = MockRoutes::start();
    mock.on(DEVICE, device_reply("A"));
    mock.on(TOKEN, token_reply("acc", "ref"));
    mock.on(MODELS, models_reply());
    let (code, ..) = run(&mut kiwi(&env, Some(&mock), &["login", "--json"]));
    assert_eq!(code, 0);
    // A model of the user's own stays.
    let config_path = env.share().join("config.toml");
    let mut text = std::fs::read_to_string(&config_path).unwrap();
    text.push_str("\n[models.mine]\nprovider = \"p\"\nmodel = \"m\"\nmax_context_size = 1\n\n[providers.p]\ntype = \"kimi\"\nbase_url = \"u\"\napi_key = \"k\"\n");
    std::fs::write(&config_path, text).unwrap();

    let (code, out, err) = run(&mut kiwi(&env, None, &["logout", "--json"]));
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out, [r#"{"type": "success", "message": "Logged out successfully."}"#]);
    assert!(!credential_path(&env).exists());
    let config = read_toml(&config_path);
    assert_eq!(config["default_model"].as_str(), Some(""));
    assert_eq!(config["models"].as_table().unwrap().keys().collect::<Vec<_>>(), ["mine"]);
    assert_eq!(config["providers"].as_table().unwrap().keys().collect::<Vec<_>>(), ["p"]);
    assert!(config["services"].as_table().unwrap().is_empty());
    assert!(env.share().join("device_id").exists(), "the device id stays");

    let (code, out, _) = run(&mut kiwi(&env, None, &["logout"]));
    assert_eq!(code, 0);
    assert_eq!(out, ["Logged out successfully."]);
    // Logging out of a share dir that does not exist yet creates it and still succeeds.
    let fresh = Env::new();
    let (code, out, _) = run(&mut kiwi(&fresh, None, &["logout"]));
    assert_eq!((code, out), (0, vec!["Logged out successfully.".to_string()]));
}

#[test]
fn info_text_and_json_touch_nothing() {
    let env = Env::new();
    let version = env!("CARGO_PKG_VERSION");
    let wire = kiwi::wire::params::PROTOCOL_VERSION;
    let (code, out, err) = run(&mut kiwi(&env, None, &["info"]));
    assert_eq!((code, err.as_str()), (0, ""));
    // The reference's four lines, then kiwi's sandbox line (docs/sandbox.md).
    assert_eq!(
        out[..4],
        [
            format!("kimi-cli version: {version}"),
            "agent spec versions: 1".to_string(),
            format!("wire protocol: {wire}"),
            "python version: n/a (kiwi is written in Rust)".to_string(),
        ]
    );
    assert_eq!(out.len(), 5, "{out:?}");
    assert!(out[4].starts_with("sandbox: "), "{out:?}");
    let (code, out, _) = run(&mut kiwi(&env, None, &["info", "--json"]));
    assert_eq!(code, 0);
    assert_eq!(
        out,
        [format!(
            r#"{{"kimi_cli_version": "{version}", "agent_spec_versions": ["1"], "wire_protocol_version": "{wire}", "python_version": "n/a (kiwi is written in Rust)"}}"#
        )]
    );
    assert!(!env.share().exists(), "info creates no share dir");

    // The version kiwi's wire answers in `initialize` is the one `info` names.
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let init = k.initialize();
    assert_eq!(init["result"]["protocol_version"], wire);
    assert_eq!(init["result"]["server"]["version"], version);

    // Top-level options are not acted on, but their paths are still checked.
    let (code, _, err) = run(&mut kiwi(&env, None, &["--work-dir", "/no/such/dir", "info"]));
    assert_eq!(code, 2);
    assert!(err.contains("Directory '/no/such/dir' does not exist."), "{err}");
    let (code, out, _) = run(&mut kiwi(&env, None, &["--config-file", config.to_str().unwrap(), "info", "--json"]));
    assert_eq!((code, out.len()), (0, 1));
    let (code, ..) = run(&mut kiwi(&env, None, &["info", "--bogus"]));
    assert_eq!(code, 2);
}

// ---- wire sessions with a stored login ----

/// A config whose only model uses the managed provider with a stored login.
fn oauth_config(env: &Env, mock: &MockRoutes, storage: &str, api_key: &str, extra: Value) -> PathBuf {
    let mut config = json!({
        "default_model": "kimi-code/k",
        "models": {"kimi-code/k": {"provider": "managed:kimi-code", "model": "kimi-for-coding", "max_context_size": 100000}},
        "providers": {"managed:kimi-code": {"type": "kimi", "base_url": format!("{}/coding/v1", mock.url()),
            "api_key": api_key, "oauth": {"storage": storage, "key": "oauth/kimi-code"}}}
    });
    common::merge(&mut config, extra);
    let path = env.dir.path().join("oauth-config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

fn store_credential(env: &Env, access: &str, refresh: &str, expires_at: f64) {
    let path = credential_path(env);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let body = json!({"access_token": access, "refresh_token": refresh, "expires_at": expires_at,
        "scope": "kimi-code", "token_type": "Bearer", "expires_in": 900.0});
    std::fs::write(&path, body.to_string()).unwrap();
}

fn spawn_wire(env: &Env, mock: &MockRoutes, config: &Path) -> common::Kiwi {
    let mut cmd = env.command(config, &[]);
    cmd.env("KIMI_CODE_OAUTH_HOST", mock.url()).env_remove("KIMI_OAUTH_HOST");
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    // Every line kiwi itself logs, to check that no secret is among them.
    cmd.env("KIWI_LOG", "kiwi=trace");
    let mut k = common::Kiwi::spawn(cmd);
    k.initialize();
    k
}

/// Ends the server and returns its log file (written out at exit).
fn finish(mut k: common::Kiwi, env: &Env) -> String {
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).is_some(), "kiwi exits on EOF");
    std::fs::read_to_string(env.share().join("logs/kiwi.log")).unwrap_or_default()
}

fn assert_no_secrets(haystacks: &[&str], secrets: &[&str]) {
    for h in haystacks {
        for s in secrets {
            assert!(!h.contains(s), "secret {s:?} leaked into: {h}");
        }
    }
}

#[test]
fn an_expired_token_is_refreshed_before_the_turn_and_sent() {
    let env = Env::new();
    let mock = MockRoutes::start();
    store_credential(&env, "old-access-secret", "old-refresh-secret", now() - 10.0);
    mock.on(TOKEN, token_reply("new-access-secret", "new-refresh-secret"));
    mock.on(CHAT, Reply::chat_text("hello from the model"));
    let config = oauth_config(&env, &mock, "file", "", json!({}));
    let mut k = spawn_wire(&env, &mock, &config);
    let (events, resp) = k.prompt("p0", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));

    let refreshes = mock.requests_to(TOKEN);
    assert_eq!(refreshes.len(), 1, "one refresh, however many callers found the token due");
    assert_eq!(
        refreshes[0].body_text(),
        format!("client_id={CLIENT_ID}&grant_type=refresh_token&refresh_token=old-refresh-secret")
    );
    assert_eq!(refreshes[0].header("x-msh-platform"), Some("kimi_cli"));
    let chats = mock.requests_to(CHAT);
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].header("authorization"), Some("Bearer new-access-secret"));

    let stored: Value = serde_json::from_str(&std::fs::read_to_string(credential_path(&env)).unwrap()).unwrap();
    assert_eq!(stored["access_token"], "new-access-secret");
    assert_eq!(stored["refresh_token"], "new-refresh-secret");
    assert_eq!(std::fs::metadata(credential_path(&env)).unwrap().permissions().mode() & 0o777, 0o600);

    let frames: Vec<String> = k.seen.iter().map(Value::to_string).collect();
    let log = finish(k, &env);
    assert!(log.contains("login token refreshed"), "{log}");
    let mut haystacks: Vec<&str> = frames.iter().map(String::as_str).collect();
    haystacks.push(&log);
    assert_no_secrets(
        &haystacks,
        &["old-access-secret", "old-refresh-secret", "new-access-secret", "new-refresh-secret"],
    );
}

#[test]
fn a_401_refreshes_once_retries_once_then_answers_32004() {
    let env = Env::new();
    let mock = MockRoutes::start();
    // Fresh for an hour: nothing is refreshed until the provider says 401.
    store_credential(&env, "acc-a", "ref-a", now() + 3600.0);
    mock.on(TOKEN, token_reply("acc-b", "ref-b"));
    mock.on(
        CHAT,
        Reply::json(
            401,
            json!({"error": {"message": "Invalid Authentication", "type": "invalid_authentication_error"}}),
        ),
    );
    // The legacy keyring storage reads the same file.
    let config = oauth_config(&env, &mock, "keyring", "", json!({}));
    let mut k = spawn_wire(&env, &mock, &config);
    let (events, resp) = k.prompt("p0", json!("hi"));
    assert_eq!(
        resp,
        json!({"jsonrpc": "2.0", "id": "p0", "error": {"code": -32004, "message": EXPIRED_MESSAGE, "data": null}}),
        "{:?}",
        types(&events)
    );
    assert!(!types(&events).contains(&"StepRetry".to_string()), "401 is not retried by the step loop");
    let chats = mock.requests_to(CHAT);
    assert_eq!(chats.len(), 2, "the request, then the same request once more");
    assert_eq!(chats[0].header("authorization"), Some("Bearer acc-a"));
    assert_eq!(chats[1].header("authorization"), Some("Bearer acc-b"));
    assert_eq!(chats[0].body, chats[1].body);
    assert_eq!(mock.requests_to(TOKEN).len(), 1);
    let log = finish(k, &env);
    assert!(log.contains("keyring"), "the keyring is named in the log: {log}");
    assert_no_secrets(&[&log], &["acc-a", "acc-b", "ref-a", "ref-b"]);
}

#[test]
fn a_401_whose_refresh_is_rejected_answers_32004_at_once() {
    let env = Env::new();
    let mock = MockRoutes::start();
    store_credential(&env, "acc-a", "ref-a", now() + 3600.0);
    mock.on(TOKEN, Reply::json(401, json!({"error": "invalid_grant", "error_description": "refresh token revoked"})));
    mock.on(CHAT, Reply::json(401, json!({"error": {"message": "no"}})));
    let config = oauth_config(&env, &mock, "file", "", json!({}));
    let mut k = spawn_wire(&env, &mock, &config);
    let (_, resp) = k.prompt("p0", json!("hi"));
    assert_eq!(resp["error"]["code"], -32004);
    assert_eq!(resp["error"]["message"], EXPIRED_MESSAGE);
    assert_eq!(mock.requests_to(CHAT).len(), 1, "no second try without a new token");
    assert_eq!(mock.requests_to(TOKEN).len(), 1);
    assert!(credential_path(&env).exists(), "a rejected refresh keeps the file");
    let log = finish(k, &env);
    assert!(log.contains("refresh token revoked"), "{log}");
}

#[test]
fn a_rejected_refresh_falls_back_to_api_key_and_is_not_retried() {
    let env = Env::new();
    let mock = MockRoutes::start();
    store_credential(&env, "acc-old", "ref-old", now() - 5.0);
    mock.on(TOKEN, Reply::json(403, json!({"error": "invalid_grant"})));
    mock.on(CHAT, Reply::chat_text("ok"));
    let config = oauth_config(&env, &mock, "file", "cfg-fallback-key", json!({}));
    let mut k = spawn_wire(&env, &mock, &config);
    for id in ["p0", "p1"] {
        let (events, resp) = k.prompt(id, json!("hi"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    }
    let chats = mock.requests_to(CHAT);
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.header("authorization"), Some("Bearer cfg-fallback-key"));
    }
    assert_eq!(mock.requests_to(TOKEN).len(), 1, "a rejected refresh token is not sent again");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(credential_path(&env)).unwrap()).unwrap();
    assert_eq!(stored["access_token"], "acc-old", "the file is kept");
    let log = finish(k, &env);
    assert!(log.contains("Token refresh unauthorized."), "{log}");
    assert_no_secrets(&[&log], &["acc-old", "ref-old", "cfg-fallback-key"]);
}

#[test]
fn refresh_server_errors_are_retried_then_the_old_token_stays() {
    let env = Env::new();
    let mock = MockRoutes::start();
    store_credential(&env, "acc-old", "ref-old", now() + 60.0);
    mock.on(TOKEN, Reply::json(503, json!({"error": "busy"})));
    mock.on(CHAT, Reply::chat_text("ok"));
    let config = oauth_config(&env, &mock, "file", "", json!({}));
    let mut k = spawn_wire(&env, &mock, &config);
    let (_, resp) = k.prompt("p0", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    assert_eq!(mock.requests_to(CHAT)[0].header("authorization"), Some("Bearer acc-old"));
    assert_eq!(mock.requests_to(TOKEN).len(), 3, "3 attempts in total, by whichever caller got there first");
    let log = finish(k, &env);
    assert!(log.contains("Token refresh failed after retries."), "{log}");
}

#[test]
fn bad_or_missing_credential_files_fall_back_to_api_key() {
    // (file content, the key the chat request carries, refresh requests)
    let cases = [
        (None, "Bearer cfg-key", 0),
        (Some("not json"), "Bearer cfg-key", 0),
        (Some("[1]"), "Bearer cfg-key", 0),
        (Some(r#"{"access_token": "", "expires_at": "soon"}"#), "Bearer cfg-key", 0),
        // Only a refresh token: it is used to get an access token.
        (Some(r#"{"refresh_token": "r-only"}"#), "Bearer acc-new", 1),
    ];
    for (content, auth, refreshes) in cases {
        let env = Env::new();
        let mock = MockRoutes::start();
        if let Some(content) = content {
            std::fs::create_dir_all(credential_path(&env).parent().unwrap()).unwrap();
            std::fs::write(credential_path(&env), content).unwrap();
        }
        mock.on(TOKEN, token_reply("acc-new", "ref-new"));
        mock.on(CHAT, Reply::chat_text("ok"));
        let config = oauth_config(&env, &mock, "file", "cfg-key", json!({}));
        let mut k = spawn_wire(&env, &mock, &config);
        let (_, resp) = k.prompt("p0", json!("hi"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{content:?}");
        assert_eq!(mock.requests_to(CHAT)[0].header("authorization"), Some(auth), "{content:?}");
        assert_eq!(mock.requests_to(TOKEN).len(), refreshes, "{content:?}");
        drop(k);
    }
}

#[test]
fn search_and_fetch_services_send_the_stored_token() {
    let env = Env::new();
    let mock = MockRoutes::start();
    store_credential(&env, "svc-token", "svc-refresh", now() + 3600.0);
    mock.on(
        "POST /coding/v1/search",
        Reply::json(
            200,
            json!({"search_results": [{"site_name": "s", "title": "T", "url": "http://x", "snippet": "snip"}]}),
        ),
    );
    mock.on("POST /coding/v1/fetch", Reply::text(200, "fetched page"));
    let service = |path: &str| {
        json!({"base_url": format!("{}/coding/v1/{path}", mock.url()), "api_key": "",
            "oauth": {"storage": "file", "key": "oauth/kimi-code"}})
    };
    let search_call = r#"tool_call: {"id": "s1", "name": "SearchWeb", "arguments": "{\"query\": \"kiwi\"}"}"#;
    let fetch_call =
        r#"tool_call: {"id": "f1", "name": "FetchURL", "arguments": "{\"url\": \"http://example.invalid/\"}"}"#;
    let config = env.scripted_config_with(
        &[search_call, fetch_call, "text: done"],
        json!({"services": {"moonshot_search": service("search"), "moonshot_fetch": service("fetch")}}),
    );
    let mut k = spawn_wire(&env, &mock, &config);
    let (events, resp) = k.prompt("p0", json!("go"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    let search = mock.requests_to("POST /coding/v1/search");
    assert_eq!(search.len(), 1, "{:?}", types(&events));
    assert_eq!(search[0].header("authorization"), Some("Bearer svc-token"));
    let fetch = mock.requests_to("POST /coding/v1/fetch");
    assert_eq!(fetch.len(), 1);
    assert_eq!(fetch[0].header("authorization"), Some("Bearer svc-token"));
}

#[test]
fn the_npm_sdk_logs_in_and_out() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if let Err(reason) = npm::ready(&sdk, "@moonshot-ai/kimi-agent-sdk") {
        return npm::skip("the SDK login test", &reason);
    }
    let env = Env::new();
    let mock = MockRoutes::start();
    mock.on(DEVICE, device_reply("SDK1"));
    mock.on(TOKEN, token_reply("acc", "ref"));
    mock.on(MODELS, models_reply());
    let mut node = Command::new("node");
    for var in PROXY_VARS {
        node.env_remove(var);
    }
    let output = node
        .arg(sdk.join("login.mjs"))
        .current_dir(&sdk)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIMI_SHARE_DIR", env.share())
        .env("HOME", env.home())
        .env("KIMI_CODE_OAUTH_HOST", mock.url())
        .env("KIMI_CODE_BASE_URL", format!("{}/coding/v1", mock.url()))
        .env("BROWSER", "true")
        .env_remove("DISPLAY")
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{stdout}: {e}"));
    assert_eq!(seen["first"], json!({"success": true}));
    assert_eq!(seen["urls"], json!(["http://verify.test/device?code=SDK1"]));
    assert_eq!(seen["loggedIn"], true);
    assert_eq!(seen["defaultModel"], "kimi-code/kimi-for-coding");
    assert_eq!(seen["models"], json!(["kimi-code/kimi-for-coding", "kimi-code/plain-model"]));
    assert_eq!(seen["out"], json!({"success": true}));
    assert_eq!(seen["after"], false);
    assert_eq!(seen["failed"]["success"], false);
    let error = seen["failed"]["error"].as_str().unwrap();
    assert!(error.starts_with(r#"{"type": "error", "message": "Login failed: "#), "{error}");
}
