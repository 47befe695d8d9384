//! `kiwi web` as a process: its banner in each mode, port probing, the HTTP guards (token,
//! Origin, Host, CORS preflight), `/healthz` and the JSON 404/405, the refusal of
//! `--dangerously-omit-auth` without a terminal, and a clean exit on SIGTERM.

use super::web_kit::{Home, free_port, http};

fn scripted_home() -> Home {
    let home = Home::new();
    home.scripted(&["text: hi".to_string()]);
    home
}

#[test]
fn local_mode_banner_and_plain_routes() {
    let home = scripted_home();
    let mut server = home.serve(&[]);
    let banner = server.banner.join("\n");
    assert!(banner.contains("WEB UI (Technical Preview)"), "{banner}");
    assert!(banner.contains(&format!("  ➜  Local    http://127.0.0.1:{}", server.port)), "{banner}");
    assert!(banner.contains("    • Use -n / --network to share on LAN") && !banner.contains("Token:"), "{banner}");
    let health = server.http("GET", "/healthz", &[], None);
    assert_eq!((health.status, health.body.as_str()), (200, r#"{"status":"ok"}"#));
    // The slash-less list path is also served (`docs/web-api.md`); other unknown paths are 404.
    let listed = server.http("GET", "/api/sessions", &[], None);
    assert_eq!((listed.status, listed.body.as_str()), (200, "[]"));
    let missing = server.http("GET", "/api/nothing-here", &[], None);
    assert_eq!((missing.status, missing.body.as_str()), (404, r#"{"detail":"Not Found"}"#));
    let wrong = server.http("POST", "/healthz", &[], Some("{}"));
    assert_eq!((wrong.status, wrong.body.as_str()), (405, r#"{"detail":"Method Not Allowed"}"#));
    let page = server.http("GET", "/", &[], None);
    assert_eq!(page.status, 200);
    assert_eq!(page.header("cache-control"), Some("no-cache, no-store, must-revalidate"));
    let status = server.terminate().expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}");
}

#[test]
fn dns_rebinding_is_refused_in_local_mode() {
    let home = scripted_home();
    let server = home.serve(&[]);
    for host in ["evil.example", "evil.example:80", "127.0.0.1.nip.io"] {
        let r = server.http("GET", "/healthz", &[("Host", host)], None);
        assert_eq!((r.status, r.body.as_str()), (403, r#"{"detail":"Host not allowed"}"#), "{host}");
    }
    for host in ["localhost", "localhost:5494", "[::1]:1"] {
        assert_eq!(server.http("GET", "/healthz", &[("Host", host)], None).status, 200, "{host}");
    }
}

#[test]
fn tokens_guard_the_api_in_lan_mode() {
    let home = scripted_home();
    let server = home.serve(&["-n", "--auth-token", "tok 123"]);
    let banner = server.banner.join("\n");
    assert!(banner.contains(&format!("  ➜  Local    http://localhost:{}/?token=tok%20123", server.port)), "{banner}");
    assert!(banner.contains("  Token:   tok 123") && banner.contains("  Mode: LAN only (private IPs)"), "{banner}");
    let unauthorized = server.http("GET", "/api/sessions/", &[], None);
    assert_eq!((unauthorized.status, unauthorized.body.as_str()), (401, r#"{"detail":"Unauthorized"}"#));
    let wrong = server.http("GET", "/api/sessions/", &[("Authorization", "Bearer tok")], None);
    assert_eq!(wrong.status, 401);
    // Past the guard: the route (or its absence) answers.
    let bearer = server.http("GET", "/api/nothing", &[("Authorization", "bearer tok 123")], None);
    assert_eq!(bearer.status, 404);
    let query = server.http("GET", "/api/nothing?token=tok%20123", &[], None);
    assert_eq!(query.status, 404);
    let post_query = server.http("POST", "/api/nothing?token=tok%20123", &[], Some("{}"));
    assert_eq!(post_query.status, 401, "the query token is for GET only");
    assert_eq!(server.http("GET", "/healthz", &[], None).status, 200);
    assert_eq!(server.http("GET", "/", &[], None).status, 200);
}

#[test]
fn public_mode_enforces_origins_and_restricts() {
    let home = scripted_home();
    let server = home.serve(&["-n", "--public", "--auth-token", "t"]);
    let banner = server.banner.join("\n");
    assert!(banner.contains("  ⚠ Sensitive APIs are restricted") && banner.contains("  ⚠ Mode: PUBLIC (all networks)"));
    let auth = ("Authorization", "Bearer t");
    let evil = server.http("GET", "/api/nothing", &[auth, ("Origin", "http://evil.example")], None);
    assert_eq!((evil.status, evil.body.as_str()), (403, r#"{"detail":"Origin not allowed"}"#));
    let own = format!("http://localhost:{}", server.port);
    let ok = server.http("GET", "/api/nothing", &[auth, ("Origin", own.as_str())], None);
    assert_eq!(ok.status, 404);
    assert_eq!(ok.header("access-control-allow-origin"), Some(own.as_str()));
    let preflight = server.http(
        "OPTIONS",
        "/api/sessions/",
        &[("Origin", "http://evil.example"), ("Access-Control-Request-Method", "POST")],
        None,
    );
    assert_eq!((preflight.status, preflight.body.as_str()), (400, "Disallowed CORS origin"));
}

#[test]
fn busy_ports_are_skipped_and_a_full_range_fails() {
    let home = scripted_home();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let server = super::web_kit::Server::start(home.command(&["-p", &port.to_string()]));
    assert_ne!(server.port, port);
    let said = format!("Port {port} is in use, using port {} instead", server.port);
    assert!(server.banner.iter().any(|l| l == &said), "{:?}", server.banner);
    assert_eq!(http(server.port, "GET", "/healthz", &[], None).status, 200);
    drop(server);
    // Ten busy ports in a row.
    let first = free_port();
    let held: Vec<_> = (0..10).filter_map(|i| std::net::TcpListener::bind(("127.0.0.1", first + i)).ok()).collect();
    if held.len() == 10 {
        let output = home.command(&["-p", &first.to_string()]).output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("Cannot find available port in range {first}-{}", first + 9)), "{stderr}");
    }
}

#[test]
fn omitting_auth_on_a_public_address_needs_a_terminal() {
    let home = scripted_home();
    let output = home.command(&["-n", "--dangerously-omit-auth", "-p", &free_port().to_string()]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("SECURITY WARNING"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Refusing to start without auth in non-interactive mode."), "{stderr}");
    // Local mode accepts it silently.
    let server = home.serve(&["--dangerously-omit-auth"]);
    assert_eq!(server.http("GET", "/healthz", &[], None).status, 200);
}

#[test]
fn the_help_flag_is_long_only() {
    let home = scripted_home();
    let output = home.command(&["--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--dangerously-omit-auth") && help.contains("-h, --host"), "{help}");
}

/// The repository's demo config (its scripts file named relative to it).
fn demo_config() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join("demo.toml")
}

fn prompt_once(server: &super::web_kit::Server, text: &str) -> Vec<serde_json::Value> {
    let created = server.http("POST", "/api/sessions/", &[], Some("{}"));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["session_id"].as_str().unwrap().to_string();
    let (mut ws, _) = server.join(&id);
    ws.initialize("i1");
    ws.send(serde_json::json!({"jsonrpc": "2.0", "method": "prompt", "id": "p1", "params": {"user_input": text}}));
    let (mut before, answer) = ws.until(|m| m["id"] == "p1" && m.get("method").is_none());
    before.push(answer);
    before
}

fn texts(messages: &[serde_json::Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["type"] == "ContentPart" && m["params"]["payload"]["type"] == "text")
        .map(|m| m["params"]["payload"]["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn config_file_and_model_apply_to_every_session_after_or_before_web() {
    // The demo config from another directory: its scripts file is found next to it.
    let home = Home::new();
    let config = demo_config();
    let server = home.serve(&["--config-file", config.to_str().unwrap()]);
    let got = prompt_once(&server, "hello");
    assert_eq!(got.last().unwrap()["result"], serde_json::json!({"status": "finished"}), "{got:?}");
    assert!(texts(&got).contains("Let me lay out the plan."), "{got:?}");
    let (_, view) = server.get_json("/api/config/");
    assert_eq!(view["default_model"], "demo", "the config API shows the file in use: {view}");
    let (_, toml) = server.get_json("/api/config/toml");
    assert_eq!(toml["path"], config.to_str().unwrap());
    assert!(!home.share().join("config.toml").exists(), "the default config was not touched");
    drop(server);

    // The same options before `web`, and -m picking the second model of a config.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), r#"["text: from model a"]"#).unwrap();
    std::fs::write(dir.path().join("b.json"), r#"["text: from model b"]"#).unwrap();
    let mut text = String::from("default_model = \"a\"\n");
    for name in ["a", "b"] {
        text.push_str(&format!(
            "[models.{name}]\nprovider = \"p{name}\"\nmodel = \"scripted_echo\"\nmax_context_size = 100000\n\
             [providers.p{name}]\ntype = \"_scripted_echo\"\nbase_url = \"\"\napi_key = \"\"\n\
             env = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = \"{name}.json\" }}\n"
        ));
    }
    let file = dir.path().join("two.toml");
    std::fs::write(&file, text).unwrap();
    let port = free_port().to_string();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["--config-file", file.to_str().unwrap(), "-m", "b", "web", "--no-open", "-p", &port]);
    cmd.current_dir(home.work()).env("HOME", home.home()).env("KIMI_SHARE_DIR", home.share());
    for var in crate::common::SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let server = super::web_kit::Server::start(cmd);
    let got = prompt_once(&server, "hello");
    assert_eq!(texts(&got), "from model b", "{got:?}");
    assert_eq!(server.get_json("/api/config/").1["default_model"], "b");
    // Picking a model in the UI ends the -m choice.
    let r = server.http("PATCH", "/api/config/", &[], Some(r#"{"default_model": "a"}"#));
    assert_eq!((r.status, r.json()["config"]["default_model"].as_str()), (200, Some("a")), "{}", r.body);
    assert_eq!(texts(&prompt_once(&server, "again")), "from model a");
    drop(server);

    // Config text is not a file: refused, not ignored.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .args(["--config", "default_model = \"\"", "web", "--no-open"])
        .env("HOME", home.home())
        .env("KIMI_SHARE_DIR", home.share())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use --config-file PATH instead of --config"));
}

#[test]
fn without_a_model_the_socket_says_which_key_to_set_where() {
    let home = Home::new();
    let server = home.serve(&[]);
    let got = prompt_once(&server, "hello");
    let error = &got.last().unwrap()["error"];
    assert_eq!((error["code"].as_i64(), error["message"].as_str()), (Some(-32001), Some("LLM is not set")), "{got:?}");
    let detail = error["data"]["detail"].as_str().unwrap();
    let config = home.share().join("config.toml");
    assert!(detail.contains("default_model") && detail.contains(config.to_str().unwrap()), "{detail}");
}

#[test]
fn the_log_file_carries_each_sessions_id() {
    let home = scripted_home();
    let server = home.serve(&[]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let got = prompt_once(&server, "hello");
        assert!(got.last().unwrap()["result"]["status"] == "finished", "{got:?}");
        ids.push(got[0]["params"]["session_id"].as_str().map(str::to_string));
    }
    drop(server);
    let log = super::web_kit::read(&home.share().join("logs").join("kiwi.log"));
    let turns: Vec<&str> = log.lines().filter(|l| l.contains("a turn begins")).collect();
    assert_eq!(turns.len(), 2, "{log}");
    let sessions: std::collections::BTreeSet<&str> =
        turns.iter().filter_map(|l| l.split("session{id=").nth(1)).map(|rest| &rest[..36]).collect();
    assert_eq!(sessions.len(), 2, "each turn names its own session: {log}");
}
