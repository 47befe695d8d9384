//! MCP OAuth end to end (`docs/subcommands.md` §1.6-§1.8, §2.3, §2.7): `kiwi mcp auth` against
//! the OAuth-protected mock (`examples/mcp_oauth_server.rs`) with a scripted "browser" in
//! `$BROWSER`, the token store it writes, its failures, and the agent using, refreshing and
//! giving up on stored tokens over the wire.

use crate::common;

use crate::mcp;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{Env, types};
use mcp::{call, payloads, stderr, stdout};
use serde_json::{Value, json};

/// The built mock.
fn mock_binary() -> PathBuf {
    mcp::example_binary("mcp_oauth_server")
}

/// The mock on 127.0.0.1; killed when dropped.
struct OAuthServer {
    child: std::process::Child,
    url: String,
}

impl OAuthServer {
    fn start(args: &[&str]) -> Self {
        let (child, url) = mcp::spawn_server(&mock_binary(), args);
        OAuthServer { child, url }
    }

    fn base(&self) -> &str {
        self.url.trim_end_matches("/mcp")
    }

    /// What the mock saw: `register`, `authorize`, `token:<grant>`, `mcp:401`.
    fn log(&self) -> Vec<String> {
        let text = http(&format!("{}/log", self.base()), "GET");
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare HTTP/1.1 request to the mock on 127.0.0.1 (no client crate needed in the tests).
fn http(url: &str, method: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(stream, "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_once("\r\n\r\n").unwrap().1.to_string()
}

fn browser() -> String {
    format!("{} --browse", mock_binary().display())
}

fn kiwi_with(share: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let browser = browser();
    let mut all = vec![("BROWSER", browser.as_str()), ("KIWI_MCP_OAUTH_CALLBACK_TIMEOUT_S", "30")];
    all.extend_from_slice(vars);
    mcp::subcommand(share, args, &all)
}

fn kiwi(share: &Path, args: &[&str]) -> Output {
    kiwi_with(share, args, &[])
}

/// Every entry file of the token store, relative to it.
fn stored_files(share: &Path) -> Vec<String> {
    let store = share.join("mcp-oauth");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&store).into_iter().flatten().flatten() {
        if dir.path().is_dir() {
            for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
                files.push(file.path().strip_prefix(&store).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    files
}

fn record(share: &Path, collection: &str) -> Value {
    let dir = std::fs::read_dir(share.join("mcp-oauth"))
        .unwrap()
        .flatten()
        .find(|d| d.path().is_dir() && d.file_name().to_string_lossy().starts_with(collection))
        .unwrap_or_else(|| panic!("no {collection} collection"));
    let file = std::fs::read_dir(dir.path()).unwrap().flatten().next().unwrap().path();
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// Makes the stored access token look expired (its absolute expiry in the past).
fn expire_access_token(share: &Path) {
    let dir = share.join("mcp-oauth/S_mcp_oauth_token_expiry-1a152c9e");
    let file = std::fs::read_dir(&dir).unwrap().flatten().next().unwrap().path();
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    doc["value"]["expires_at"] = json!(1_000_000_000.0);
    std::fs::write(&file, doc.to_string()).unwrap();
}

/// `mcp add -t http -a oauth srv <url>` and a successful `mcp auth srv`.
fn add_and_authorize(share: &Path, server: &OAuthServer) {
    assert_eq!(kiwi(share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]).status.code(), Some(0));
    let o = kiwi(share, &["mcp", "auth", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn auth_runs_the_browser_flow_and_stores_the_tokens() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]);
    let marker = format!("  srv (http): {} [authorization required - run: kimi mcp auth srv]\n", server.url);
    assert!(stdout(&kiwi(&share, &["mcp", "list"])).ends_with(&marker));

    let o = kiwi(&share, &["mcp", "auth", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert_eq!(lines[..2], ["Authorizing with 'srv'...", "A browser window will open for authorization."]);
    assert!(lines[2].contains("open this URL yourself"), "{out}");
    let authorize = lines[3];
    assert!(authorize.starts_with(&format!("{}/authorize?response_type=code&client_id=", server.base())), "{out}");
    for part in
        ["&code_challenge_method=S256", "&redirect_uri=http%3A%2F%2Flocalhost%3A", "&resource=http%3A%2F%2F127.0.0.1"]
    {
        assert!(authorize.contains(part), "{part} in {authorize}");
    }
    assert_eq!(lines[4..], ["Successfully authorized with 'srv'.", "Available tools: 3"]);
    assert_eq!(stderr(&o), "");
    assert_eq!(server.log(), ["mcp:401", "register", "authorize", "authorize", "token:authorization_code"]);

    // The store: the reference's layout, 0600 files in 0700 folders.
    let key = server.url.replace(['/', ':', '.'], "_").replace("___", "_");
    let files = stored_files(&share);
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0].starts_with(&format!("S_mcp_oauth_client_info-92af0fc1/S_{key}_client_info-")), "{files:?}");
    assert!(files[1].starts_with(&format!("S_mcp_oauth_token-3a009b34/S_{key}_tokens-")), "{files:?}");
    assert!(files[2].starts_with(&format!("S_mcp_oauth_token_expiry-1a152c9e/S_{key}_token_expiry-")), "{files:?}");
    for file in &files {
        let mode = std::fs::metadata(share.join("mcp-oauth").join(file)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    assert_eq!(std::fs::metadata(share.join("mcp-oauth")).unwrap().permissions().mode() & 0o777, 0o700);
    let tokens = record(&share, "S_mcp_oauth_token-");
    let members: Vec<&String> = tokens.as_object().unwrap().keys().collect();
    assert_eq!(members, ["created_at", "expires_at", "value", "version"]);
    let value: Vec<&String> = tokens["value"].as_object().unwrap().keys().collect();
    assert_eq!(value, ["access_token", "expires_in", "refresh_token", "scope", "token_type"]);
    assert_eq!(tokens["value"]["token_type"], "Bearer");
    assert_eq!(tokens["value"]["expires_in"], 3600);
    assert!(tokens["value"]["refresh_token"].as_str().unwrap().starts_with("rt-"));
    let expiry = record(&share, "S_mcp_oauth_token_expiry-")["value"]["expires_at"].as_f64().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!((expiry - now - 3600.0).abs() < 60.0, "{expiry} vs {now}");
    let client = record(&share, "S_mcp_oauth_client_info-");
    assert_eq!(client["value"]["client_name"], "kiwi");
    assert!(client["value"]["client_id"].as_str().unwrap().starts_with("client-"));

    // list: the marker is gone; test: connects with the stored token.
    assert!(!stdout(&kiwi(&share, &["mcp", "list"])).contains("authorization required"));
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("✓ Connected to 'srv'\n  Available tools: 3\n"));

    // auth again: the stored token still works, so no browser and no new registration.
    let o = kiwi_with(&share, &["mcp", "auth", "srv"], &[("BROWSER", "false")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "Authorizing with 'srv'...\nA browser window will open for authorization.\nSuccessfully authorized with 'srv'.\nAvailable tools: 3\n"
    );
    assert_eq!(server.log().iter().filter(|l| *l == "register").count(), 1);

    // reset-auth brings the marker back, and test then says what to do.
    assert_eq!(stdout(&kiwi(&share, &["mcp", "reset-auth", "srv"])), "OAuth tokens cleared for 'srv'.\n");
    assert!(stored_files(&share).is_empty());
    assert!(stdout(&kiwi(&share, &["mcp", "list"])).ends_with(&marker));
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "Testing connection to 'srv'...\n");
    assert_eq!(
        stderr(&o),
        "✗ Connection failed: OAuthError: no OAuth tokens are stored for 'srv'; run: kiwi mcp auth srv\n"
    );
}

#[test]
fn a_server_that_does_not_ask_for_authorization_is_simply_connected() {
    let server = mcp::HttpServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "open", &server.url]);
    let o = kiwi_with(&share, &["mcp", "auth", "open"], &[("BROWSER", "false")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "Authorizing with 'open'...\nA browser window will open for authorization.\nSuccessfully authorized with 'open'.\nAvailable tools: 9\n"
    );
    assert!(stored_files(&share).is_empty());
}

#[test]
fn a_client_the_server_forgot_is_registered_again() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    add_and_authorize(&share, &server);
    let first = record(&share, "S_mcp_oauth_client_info-")["value"]["client_id"].clone();
    // The server loses its clients and tokens: the stored token is refused, the stored client's
    // authorization URL fails its pre-flight (400), and kiwi registers once more.
    http(&format!("{}/forget", server.base()), "POST");
    let o = kiwi(&share, &["mcp", "auth", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with("Successfully authorized with 'srv'.\nAvailable tools: 3\n"));
    assert_eq!(server.log().iter().filter(|l| *l == "register").count(), 2, "{:?}", server.log());
    assert_ne!(record(&share, "S_mcp_oauth_client_info-")["value"]["client_id"], first);
}

#[test]
fn a_failed_flow_says_why_and_stores_nothing() {
    for (flag, expected) in [
        (
            "--bad-metadata",
            "Authorization failed: OAuthFlowError: the authorization server metadata at {base}/.well-known/oauth-authorization-server is not valid JSON: ",
        ),
        (
            "--register-fails",
            "Authorization failed: OAuthRegistrationError: client registration answered 400: {\"error\":\"invalid_client_metadata\",\"error_description\":\"registration is closed\"}",
        ),
        (
            "--token-fails",
            "Authorization failed: OAuthTokenError: the token endpoint answered 400: {\"error\":\"invalid_grant\"}",
        ),
        (
            "--deny",
            "Authorization failed: OAuthFlowError: the authorization server refused: access_denied (the user said no)",
        ),
    ] {
        let server = OAuthServer::start(&[flag]);
        let env = Env::new();
        let share = env.share();
        kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]);
        let o = kiwi(&share, &["mcp", "auth", "srv"]);
        assert_eq!(o.status.code(), Some(1), "{flag}: {}", stdout(&o));
        let expected = expected.replace("{base}", server.base());
        assert!(stderr(&o).starts_with(&expected), "{flag}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{flag}: {}", stderr(&o));
        assert!(stdout(&o).starts_with("Authorizing with 'srv'...\nA browser window will open for authorization.\n"));
        assert!(stored_files(&share).is_empty(), "{flag}: {:?}", stored_files(&share));
        assert!(stdout(&kiwi(&share, &["mcp", "list"])).contains("[authorization required - run: kimi mcp auth srv]"));
    }
}

#[test]
fn the_callback_wait_times_out() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]);
    // A "browser" that never comes back.
    let o =
        kiwi_with(&share, &["mcp", "auth", "srv"], &[("BROWSER", "true"), ("KIWI_MCP_OAUTH_CALLBACK_TIMEOUT_S", "1")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "Authorization failed: TimeoutError: OAuth callback timed out after 1.0 seconds\n");
    assert!(stored_files(&share).is_empty());
}

#[test]
fn a_callback_without_the_flows_state_is_not_its_answer() {
    // The authorization server (or anyone) sends the wrong state: the flow keeps waiting for the
    // real answer, here until its limit.
    let server = OAuthServer::start(&["--wrong-state"]);
    let env = Env::new();
    let share = env.share();
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]);
    let o = kiwi_with(&share, &["mcp", "auth", "srv"], &[("KIWI_MCP_OAUTH_CALLBACK_TIMEOUT_S", "2")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "Authorization failed: TimeoutError: OAuth callback timed out after 2.0 seconds\n");
    assert!(stored_files(&share).is_empty());
}

#[test]
fn forged_callbacks_and_idle_connections_do_not_stop_the_flow() {
    // A local process holds three idle connections to the callback server and sends it forged
    // callbacks (wrong or missing state, `error=`) before the browser's real one arrives. Served
    // one at a time, each idle connection would hold the server for its whole deadline (10 s).
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "srv", &server.url]);
    let hostile = format!("{} --hostile-browse", mock_binary().display());
    let o = kiwi_with(
        &share,
        &["mcp", "auth", "srv"],
        &[("BROWSER", hostile.as_str()), ("KIWI_MCP_OAUTH_CALLBACK_TIMEOUT_S", "15")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with("Successfully authorized with 'srv'.\nAvailable tools: 3\n"), "{}", stdout(&o));
    assert_eq!(server.log().iter().filter(|l| *l == "token:authorization_code").count(), 1);
}

/// A turn that calls `secret_echo` on the OAuth server (approved); its events and response.
fn secret_echo_turn(env: &Env, server: &OAuthServer) -> (Vec<Value>, Value) {
    let config = env.scripted_config(&[&call("c1", "secret_echo", json!({"text": "hi"})), "text: done"]);
    let servers = json!({"mcpServers": {"srv": {"url": server.url, "transport": "http", "auth": "oauth"}}}).to_string();
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (mut events, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["action"], "mcp:secret_echo");
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":"approve"}}));
    let (rest, response) = k.until_response(&json!("p0"));
    events.extend(rest);
    (events, response)
}

fn tool_output(events: &[Value]) -> Value {
    payloads(events, "ToolResult")[0]["return_value"]["output"].clone()
}

#[test]
fn the_agent_sends_the_stored_token() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    add_and_authorize(&env.share(), &server);
    let (events, response) = secret_echo_turn(&env, &server);
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(tool_output(&events), json!([{"type": "text", "text": "secret:hi"}]));
    assert!(!server.log().contains(&"token:refresh_token".to_string()));
}

#[test]
fn the_agent_refreshes_an_expired_token() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    add_and_authorize(&share, &server);
    let before = record(&share, "S_mcp_oauth_token-")["value"].clone();
    expire_access_token(&share);
    let (events, response) = secret_echo_turn(&env, &server);
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(tool_output(&events), json!([{"type": "text", "text": "secret:hi"}]));
    assert_eq!(server.log().iter().filter(|l| *l == "token:refresh_token").count(), 1, "{:?}", server.log());
    // The refreshed (rotated) tokens and a new expiry are stored.
    let after = record(&share, "S_mcp_oauth_token-")["value"].clone();
    assert_ne!(after["access_token"], before["access_token"]);
    assert_ne!(after["refresh_token"], before["refresh_token"]);
    let expiry = record(&share, "S_mcp_oauth_token_expiry-")["value"]["expires_at"].as_f64().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(expiry > now + 3000.0, "{expiry} vs {now}");
    // And `kiwi mcp test` uses them without another refresh.
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(server.log().iter().filter(|l| *l == "token:refresh_token").count(), 1);
}

#[test]
fn a_refused_token_is_refreshed_once() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    let share = env.share();
    add_and_authorize(&share, &server);
    // Unexpired by the stored expiry, but revoked by the server: 401, one refresh, connected.
    http(&format!("{}/revoke", server.base()), "POST");
    let (events, response) = secret_echo_turn(&env, &server);
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(tool_output(&events), json!([{"type": "text", "text": "secret:hi"}]));
    let log = server.log();
    assert_eq!(log.iter().filter(|l| *l == "token:refresh_token").count(), 1, "{log:?}");
    // `kiwi mcp test` does the same.
    http(&format!("{}/revoke", server.base()), "POST");
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(server.log().iter().filter(|l| *l == "token:refresh_token").count(), 2);
}

#[test]
fn a_refused_token_that_cannot_be_refreshed_is_unauthorized() {
    let server = OAuthServer::start(&["--refresh-fails"]);
    let env = Env::new();
    add_and_authorize(&env.share(), &server);
    http(&format!("{}/revoke", server.base()), "POST");
    let config = env.scripted_config(&["text: hello"]);
    let servers = json!({"mcpServers": {"srv": {"url": server.url, "transport": "http", "auth": "oauth"}}}).to_string();
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("hi"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(payloads(&events, "StatusUpdate")[1]["mcp_status"]["servers"][0]["status"], "unauthorized");
}

#[test]
fn a_failed_refresh_leaves_the_server_unauthorized_and_the_turn_goes_on() {
    let server = OAuthServer::start(&["--refresh-fails"]);
    let env = Env::new();
    let share = env.share();
    add_and_authorize(&share, &server);
    expire_access_token(&share);
    let before = std::fs::read_to_string(share.join("mcp-oauth").join(&stored_files(&share)[1])).unwrap();
    let config = env.scripted_config(&["text: hello"]);
    let servers = json!({"mcpServers": {"srv": {"url": server.url, "transport": "http", "auth": "oauth"}}}).to_string();
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("hi"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(types(&events)[..5], ["TurnBegin", "StatusUpdate", "MCPLoadingBegin", "StatusUpdate", "MCPLoadingEnd"]);
    let last = &payloads(&events, "StatusUpdate")[1]["mcp_status"];
    assert_eq!(
        *last,
        json!({"loading": false, "connected": 0, "total": 1, "tools": 0,
               "servers": [{"name": "srv", "status": "unauthorized", "tools": []}]})
    );
    assert!(server.log().contains(&"token:refresh_token".to_string()));
    // Never a browser flow from the agent: no new registration or authorization.
    assert_eq!(server.log().iter().filter(|l| *l == "register").count(), 1);
    // The stored tokens are left for `kiwi mcp auth` to replace.
    let after = std::fs::read_to_string(share.join("mcp-oauth").join(&stored_files(&share)[1])).unwrap();
    assert_eq!(before, after);
    // The log is written behind the turn, by the logger's own thread.
    let read_log = || std::fs::read_to_string(share.join("logs/kiwi.log")).unwrap_or_default();
    let logged = common::wait_until(Duration::from_secs(10), || read_log().contains("MCP server srv is unauthorized"));
    assert!(logged, "{}", read_log());
    // `kiwi mcp test` says the same, without a browser.
    let o = kiwi_with(&share, &["mcp", "test", "srv"], &[("BROWSER", "false")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.starts_with("✗ Connection failed: OAuthError: the OAuth token has expired and refreshing it failed: OAuthTokenError: the token endpoint answered 400"), "{err}");
    assert!(err.ends_with("; run: kiwi mcp auth srv\n"), "{err}");
    k.close_stdin();
    k.wait_exit(Duration::from_secs(10));
}

#[test]
fn a_token_refused_mid_session_is_refreshed_and_the_call_made_again() {
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    add_and_authorize(&env.share(), &server);
    let config = env.scripted_config(&[
        &call("c1", "secret_echo", json!({"text": "one"})),
        "text: first done",
        &call("c2", "secret_echo", json!({"text": "two"})),
        "text: second done",
    ]);
    let servers = json!({"mcpServers": {"srv": {"url": server.url, "transport": "http", "auth": "oauth"}}}).to_string();
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, _) = k.prompt("p0", json!("go"));
    assert_eq!(tool_output(&events), json!([{"type": "text", "text": "secret:one"}]));
    // The live session's token stops working (the server revoked it before its expiry).
    http(&format!("{}/revoke", server.base()), "POST");
    let (events, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(tool_output(&events), json!([{"type": "text", "text": "secret:two"}]), "{events:?}");
    let log = server.log();
    assert_eq!(log.iter().filter(|l| *l == "token:refresh_token").count(), 1, "{log:?}");
}

#[test]
fn a_tool_error_that_says_http_401_is_not_a_refused_token() {
    // The tool's own JSON-RPC error mentions an HTTP 401 (of an API it called); the server took
    // kiwi's token. No refresh, and the call is not made a second time.
    let server = OAuthServer::start(&[]);
    let env = Env::new();
    add_and_authorize(&env.share(), &server);
    let config = env.scripted_config(&[&call("c1", "upstream_401", json!({})), "text: done"]);
    let servers = json!({"mcpServers": {"srv": {"url": server.url, "transport": "http", "auth": "oauth"}}}).to_string();
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(result["message"], "Error running tool: the upstream API answered HTTP 401 Unauthorized");
    let log = server.log();
    assert_eq!(log.iter().filter(|l| *l == "call:upstream_401").count(), 1, "{log:?}");
    assert!(!log.contains(&"token:refresh_token".to_string()), "{log:?}");
}
