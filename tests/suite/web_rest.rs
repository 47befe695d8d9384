//! The REST API of `kiwi web` against a real server on a free port (`docs/web-api.md`): every
//! endpoint, its statuses and detail strings, traversal and symlink attempts, oversize uploads,
//! FastAPI-shaped 422s, restricted mode.

use crate::common;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};

const CONFIG: &str = r#"# kept comment
default_model = "scripted"
default_thinking = false

[models.scripted]
provider = "scripted_provider"
model = "scripted_echo"
max_context_size = 100000
capabilities = ["image_in"]

[models.other]
provider = "scripted_provider"
model = "k-thinking"
max_context_size = 1000

[providers.scripted_provider]
type = "_scripted_echo"
base_url = ""
api_key = "sk-secret-123"
"#;

/// A `kiwi web` child on a free port, killed when dropped.
struct Web {
    child: Child,
    base: String,
    env: Env,
    http: reqwest::Client,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Web {
    fn start(extra: &[&str]) -> Web {
        let env = Env::new();
        std::fs::create_dir_all(env.share()).unwrap();
        std::fs::write(env.share().join("config.toml"), CONFIG).unwrap();
        let port = free_port().to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiwi"))
            .args(["web", "--port", &port, "--no-open"])
            .args(extra)
            .current_dir(env.work())
            .env("HOME", env.home())
            .env("KIMI_SHARE_DIR", env.share())
            .env_remove("KIMI_WEB_MAX_PUBLIC_PATH_DEPTH")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(i) = line.find("http://") {
                    let url: String = line[i..].chars().take_while(|c| !c.is_whitespace()).collect();
                    let _ = tx.send(url);
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(30)).expect("kiwi web printed its URL");
        let hostport = url.trim_start_matches("http://").split(['/', '?']).next().unwrap().to_string();
        let port = hostport.rsplit(':').next().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        // The server requires the token its banner prints (`?token=…`); every request carries it.
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some((_, token)) = url.split_once("?token=") {
            headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        }
        let http = kiwi::net::client_builder().no_proxy().default_headers(headers).build().unwrap();
        Web { child, base, env, http }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn raw(&self, path: &str) -> reqwest::Response {
        self.http.get(format!("{}{path}", self.base)).send().await.unwrap()
    }

    async fn create(&self, work_dir: &Path) -> Value {
        let (s, v) = self.call(reqwest::Method::POST, "/api/sessions/", Some(json!({"work_dir": work_dir}))).await;
        assert_eq!(s, 200, "{v}");
        v
    }
}

fn detail(v: &Value) -> &str {
    v["detail"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_create_get_list_update_delete() {
    let web = Web::start(&[]);
    assert_eq!(web.get("/healthz").await, (200, json!({"status": "ok"})));
    assert_eq!(web.get("/api/sessions/").await, (200, json!([])));

    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap().to_string();
    assert_eq!(s["title"], "Untitled");
    assert_eq!(s["work_dir"], work.to_str().unwrap());
    assert_eq!(s["is_running"], false);
    assert_eq!(s["archived"], false);
    assert_eq!(s["status"]["state"], "stopped");
    assert_eq!(s["status"]["seq"], 0);
    assert!(Path::new(s["session_dir"].as_str().unwrap()).join("context.jsonl").is_file());
    let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["session_id", "title", "last_updated", "is_running", "status", "work_dir", "session_dir", "archived"]
    );

    // No body: the home dir.
    let (st, home) = web.call(reqwest::Method::POST, "/api/sessions/", None).await;
    assert_eq!(st, 200, "{home}");
    assert_eq!(home["work_dir"], std::fs::canonicalize(web.env.home()).unwrap().to_str().unwrap());

    // Work-dir errors.
    let (st, v) = web.call(reqwest::Method::POST, "/api/sessions/", Some(json!({"work_dir": "/no/such/dir"}))).await;
    assert_eq!((st, detail(&v)), (404, "Directory does not exist: /no/such/dir"));
    let file = work.join("plain.txt");
    std::fs::write(&file, "x").unwrap();
    let (st, v) = web.call(reqwest::Method::POST, "/api/sessions/", Some(json!({"work_dir": file}))).await;
    assert_eq!((st, detail(&v).to_string()), (400, format!("Path is not a directory: {}", file.display())));
    let fresh = work.join("made/here");
    let (st, v) =
        web.call(reqwest::Method::POST, "/api/sessions/", Some(json!({"work_dir": fresh, "create_dir": true}))).await;
    assert_eq!(st, 200, "{v}");
    assert!(fresh.is_dir());
    let (st, v) = web.call(reqwest::Method::POST, "/api/sessions/", Some(json!({"work_dir": 5}))).await;
    assert_eq!(st, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["body", "work_dir"]));

    // Get.
    let (st, got) = web.get(&format!("/api/sessions/{id}")).await;
    assert_eq!((st, got["session_id"].as_str()), (200, Some(id.as_str())));
    assert_eq!(got["status"], Value::Null, "not hosted: no status");
    assert_eq!(web.get("/api/sessions/00000000-0000-4000-8000-000000000000").await, (200, Value::Null));
    let (st, v) = web.get("/api/sessions/not-a-uuid").await;
    assert_eq!(st, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["path", "session_id"]));

    // List, paging, search.
    let (st, list) = web.get("/api/sessions/").await;
    assert_eq!(st, 200);
    assert_eq!(list.as_array().unwrap().len(), 3);
    let (_, page) = web.get("/api/sessions/?limit=1&offset=1").await;
    assert_eq!(page.as_array().unwrap().len(), 1);
    let (st, v) = web.get("/api/sessions/?limit=abc").await;
    assert_eq!(st, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["query", "limit"]));
    let (st, _) = web.get("/api/sessions/?archived=maybe").await;
    assert_eq!(st, 422);

    // Rename and archive.
    let path = format!("/api/sessions/{id}");
    let (st, v) = web.call(reqwest::Method::PATCH, &path, Some(json!({"title": ""}))).await;
    assert_eq!(st, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["body", "title"]));
    let (st, v) = web.call(reqwest::Method::PATCH, &path, Some(json!({"title": "x".repeat(201)}))).await;
    assert_eq!(st, 422, "{v}");
    let (st, v) = web.call(reqwest::Method::PATCH, &path, Some(json!({"title": "Renamed", "archived": true}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["title"].as_str(), v["archived"].as_bool(), &v["status"]),
        (Some("Renamed"), Some(true), &Value::Null)
    );
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(s["session_dir"].as_str().unwrap()).join("state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!((state["custom_title"].as_str(), state["title_generated"].as_bool()), (Some("Renamed"), Some(true)));
    assert!(state["archived_at"].is_f64());
    let (_, active) = web.get("/api/sessions/").await;
    assert!(active.as_array().unwrap().iter().all(|x| x["session_id"] != id.as_str()));
    let (_, archived) = web.get("/api/sessions/?archived=true").await;
    assert_eq!(archived[0]["session_id"], id.as_str());
    let (_, found) = web.get("/api/sessions/?archived=true&q=RENAM").await;
    assert_eq!(found.as_array().unwrap().len(), 1);
    let (st, v) =
        web.call(reqwest::Method::PATCH, "/api/sessions/00000000-0000-4000-8000-000000000000", Some(json!({}))).await;
    assert_eq!((st, detail(&v)), (404, "Session not found"));

    // Export download.
    let resp = web.raw(&format!("/api/sessions/{id}/export")).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "application/zip");
    let bytes = resp.bytes().await.unwrap();
    assert_eq!(&bytes[..4], b"PK\x03\x04");

    // Delete.
    assert_eq!(web.call(reqwest::Method::DELETE, &path, None).await, (200, Value::Null));
    let (st, v) = web.call(reqwest::Method::DELETE, &path, None).await;
    assert_eq!((st, detail(&v)), (404, "Session not found"));
    assert!(!Path::new(s["session_dir"].as_str().unwrap()).exists());
    assert_eq!(web.get(&path).await, (200, Value::Null));
}

fn setup_files(work: &Path, outside: &Path) {
    std::fs::create_dir_all(work.join("src/deep/a/b/c/d/e")).unwrap();
    std::fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(work.join("src/deep/a/b/c/d/e/f.txt"), "deep").unwrap();
    std::fs::write(work.join("key.pem"), "secret").unwrap();
    std::fs::create_dir_all(work.join(".hidden")).unwrap();
    std::fs::write(work.join(".hidden/s.txt"), "hidden").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(outside, work.join("escape")).unwrap();
    std::os::unix::fs::symlink(work.join("src"), work.join("inside")).unwrap();
}

/// Issue 30, also found: a FIFO in the work dir hung the file API (the read never ends); anything
/// that is neither a regular file nor a folder is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_in_the_work_dir_is_refused_not_read() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let fifo = work.join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap();
    let answer =
        tokio::time::timeout(Duration::from_secs(20), web.get(&format!("/api/sessions/{id}/files/pipe"))).await;
    let (status, v) = answer.expect("the request hangs on the FIFO");
    assert_eq!((status, detail(&v)), (400, "Not a regular file or directory"));
    assert_eq!(web.get("/healthz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_dir_files_are_confined() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let outside = web.env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    setup_files(&work, &outside);
    let id = web.create(&work).await["session_id"].as_str().unwrap().to_string();
    let files = format!("/api/sessions/{id}/files");

    let resp = web.raw(&format!("{files}/")).await;
    assert_eq!(resp.headers()["x-kiwi-entry"], "directory");
    let list: Value = resp.json().await.unwrap();
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, [".hidden", "escape", "inside", "src", "key.pem"]);
    assert_eq!(list[4], json!({"name": "key.pem", "type": "file", "size": 6}));

    let resp = web.raw(&format!("{files}/src%2Fmain.rs")).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        resp.headers()["content-disposition"].to_str().unwrap().starts_with("attachment; filename*=UTF-8''main.rs")
    );
    assert_eq!(resp.text().await.unwrap(), "fn main() {}\n");
    let (st, _) = web.get(&format!("{files}/inside/main.rs")).await;
    assert_eq!(st, 200, "a symlink inside the work dir is followed");

    for bad in ["%2E%2E%2Fetc", "..%2F..%2Fetc%2Fpasswd", "escape%2Fsecret.txt", "escape", "%2Fetc%2Fpasswd"] {
        let (st, v) = web.get(&format!("{files}/{bad}")).await;
        assert_eq!((st, detail(&v)), (400, "Invalid path: path traversal not allowed"), "{bad}");
    }
    let (st, v) = web.get(&format!("{files}/nope.txt")).await;
    assert_eq!((st, detail(&v)), (404, "File not found"));
    let (st, v) = web.get("/api/sessions/00000000-0000-4000-8000-000000000000/files/").await;
    assert_eq!((st, detail(&v)), (404, "Session not found"));

    // Git diff: not a repository, then one.
    let (st, v) = web.get(&format!("/api/sessions/{id}/git-diff")).await;
    assert_eq!(
        (st, v),
        (
            200,
            json!({"is_git_repo": false, "has_changes": false, "total_additions": 0, "total_deletions": 0, "files": [], "error": null})
        )
    );
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e")
            .output()
            .unwrap();
        assert!(o.status.success());
    };
    git(&["init", "-q"]);
    git(&["add", "src/main.rs"]);
    git(&["commit", "-q", "-m", "one"]);
    std::fs::write(work.join("src/main.rs"), "fn main() {}\nfn two() {}\n").unwrap();
    let (_, v) = web.get(&format!("/api/sessions/{id}/git-diff")).await;
    assert_eq!(
        (v["is_git_repo"].as_bool(), v["has_changes"].as_bool(), v["total_additions"].as_u64()),
        (Some(true), Some(true), Some(1))
    );
    assert_eq!(v["files"][0], json!({"path": "src/main.rs", "additions": 1, "deletions": 0, "status": "added"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_mode_refuses_sensitive_paths_and_config_writes() {
    let web = Web::start(&["--restrict-sensitive-apis"]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let outside = web.env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    setup_files(&work, &outside);
    let id = web.create(&work).await["session_id"].as_str().unwrap().to_string();
    let files = format!("/api/sessions/{id}/files");
    let (_, list) = web.get(&format!("{files}/")).await;
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["escape", "inside", "src"], "hidden and key files are left out");
    let cases = [
        ("inside%2Fmain.rs", "Symbolic links are not allowed in public mode."),
        ("key.pem", "Access to sensitive files is disabled."),
        (".hidden%2Fs.txt", "Access to sensitive files is disabled."),
        ("src%2Fdeep%2Fa%2Fb%2Fc%2Fd%2Fe%2Ff.txt", "Path too deep for public access (max depth: 6, current: 8)."),
    ];
    for (path, expected) in cases {
        let (st, v) = web.get(&format!("{files}/{path}")).await;
        assert_eq!((st, detail(&v)), (403, expected), "{path}");
    }
    let (st, v) = web.get(&format!("{files}/escape%2Fsecret.txt")).await;
    assert_eq!(st, 400, "confinement comes first: {v}");
    let (st, _) = web.get(&format!("{files}/src%2Fmain.rs")).await;
    assert_eq!(st, 200);

    let (st, _) = web.get("/api/config/").await;
    assert_eq!(st, 200, "reading the model list stays allowed");
    for (method, path, body) in [
        (reqwest::Method::PATCH, "/api/config/", json!({"default_thinking": true})),
        (reqwest::Method::GET, "/api/config/toml", Value::Null),
        (reqwest::Method::PUT, "/api/config/toml", json!({"content": CONFIG})),
    ] {
        let body = (!body.is_null()).then_some(body);
        let (st, v) = web.call(method, path, body).await;
        assert_eq!((st, detail(&v)), (403, "Sensitive config APIs are disabled in this mode."), "{path}");
    }
    let (st, v) = web.call(reqwest::Method::POST, "/api/open-in", Some(json!({"app": "finder", "path": "/"}))).await;
    assert_eq!((st, detail(&v)), (405, "Method Not Allowed"));
    assert_eq!(std::fs::read_to_string(web.env.share().join("config.toml")).unwrap(), CONFIG);
}

/// Issue 30 item 3: an uploaded page or SVG opened from the UI must not run script in kiwi's
/// origin: user content is an attachment unless it is passive media, always `nosniff` and
/// sandboxed by its own Content-Security-Policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_that_could_run_script_are_attachments_in_a_sandbox() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    std::fs::write(work.join("page.html"), "<script>alert(1)</script>").unwrap();
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap();
    let url = format!("{}/api/sessions/{id}/files", web.base);
    for (file, disposition) in [
        ("x.html", "attachment"),
        ("x.svg", "attachment"),
        ("x.js", "attachment"),
        ("x.png", "inline"),
        ("x.txt", "inline"),
    ] {
        let part = reqwest::multipart::Part::bytes(b"<svg onload=alert(1)>".to_vec()).file_name(file);
        let form = reqwest::multipart::Form::new().part("file", part);
        let v: Value = web.http.post(&url).multipart(form).send().await.unwrap().json().await.unwrap();
        let name = percent_encode(v["filename"].as_str().unwrap());
        let resp = web.raw(&format!("/api/sessions/{id}/uploads/{name}")).await;
        let h = resp.headers();
        let got = h["content-disposition"].to_str().unwrap();
        assert!(got.starts_with(&format!("{disposition};")), "{file}: {got}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{file}");
        assert!(h["content-security-policy"].to_str().unwrap().starts_with("sandbox; default-src 'none'"), "{file}");
    }
    let resp = web.raw(&format!("/api/sessions/{id}/files/page.html")).await;
    assert!(resp.headers()["content-disposition"].to_str().unwrap().starts_with("attachment;"));
    assert!(resp.headers()["content-security-policy"].to_str().unwrap().starts_with("sandbox;"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_stored_bounded_and_served() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap();
    let session_dir = PathBuf::from(s["session_dir"].as_str().unwrap());
    let url = format!("{}/api/sessions/{id}/files", web.base);

    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(b"hello upload".to_vec()).file_name("my résumé (1).txt"));
    let resp = web.http.post(&url).multipart(form).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    let name = v["filename"].as_str().unwrap().to_string();
    assert!(name.starts_with("my résumé 1_") && name.ends_with(".txt"), "{name}");
    assert_eq!(v["size"], 12);
    assert_eq!(PathBuf::from(v["path"].as_str().unwrap()), session_dir.join("uploads").join(&name));

    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(b"x".to_vec()).file_name("../../evil.png"));
    let v: Value = web.http.post(&url).multipart(form).send().await.unwrap().json().await.unwrap();
    assert!(v["filename"].as_str().unwrap().starts_with("....evil_"), "{v}");
    assert!(session_dir.join("uploads").join(v["filename"].as_str().unwrap()).is_file());

    let encoded: String = percent_encode(&name);
    let resp = web.raw(&format!("/api/sessions/{id}/uploads/{encoded}")).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    assert!(
        resp.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline; filename*=UTF-8''my%20r%C3%A9sum%C3%A9%201_")
    );
    assert_eq!(resp.text().await.unwrap(), "hello upload");
    let (st, v) = web.get(&format!("/api/sessions/{id}/uploads/%2E%2E%2Fcontext.jsonl")).await;
    assert_eq!((st, detail(&v)), (400, "Invalid path: path traversal not allowed"));
    let (st, v) = web.get(&format!("/api/sessions/{id}/uploads/missing.txt")).await;
    assert_eq!((st, detail(&v)), (404, "File not found"));

    // Past 100 MiB: refused while streaming, nothing kept.
    let chunk = bytes::Bytes::from(vec![b'a'; 1 << 20]);
    let stream = futures::stream::iter((0..101).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let part = reqwest::multipart::Part::stream(reqwest::Body::wrap_stream(stream)).file_name("big.bin");
    let resp = web.http.post(&url).multipart(reqwest::multipart::Form::new().part("file", part)).send().await;
    match resp {
        Ok(r) => {
            assert_eq!(r.status().as_u16(), 413);
            // The body was not read to its end: the connection must not be reused.
            assert_eq!(r.headers()["connection"], "close");
            let v: Value = r.json().await.unwrap();
            assert_eq!(detail(&v), "File too large (max 100MB)");
        }
        // The server may answer and close before the client finished sending.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }
    let kept: Vec<String> = std::fs::read_dir(session_dir.join("uploads"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(kept.len(), 2, "only the two small uploads: {kept:?}");

    // Another session without uploads.
    let other = web.create(&work).await;
    let (st, v) = web.get(&format!("/api/sessions/{}/uploads/a.txt", other["session_id"].as_str().unwrap())).await;
    assert_eq!((st, detail(&v)), (404, "Uploads directory not found"));
    let resp = web
        .http
        .post(format!("{}/api/sessions/00000000-0000-4000-8000-000000000000/files", web.base))
        .multipart(
            reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(b"x".to_vec()).file_name("a")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"._-".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_and_work_dirs() {
    let web = Web::start(&[]);
    let (st, v) = web.get("/api/config/").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["default_model"], "scripted");
    assert_eq!(v["default_thinking"], false);
    let names: Vec<&str> = v["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["scripted", "other"]);
    assert_eq!(v["models"][0]["provider_type"], "_scripted_echo");
    assert!(!v.to_string().contains("sk-secret"));

    let (st, v) = web.call(reqwest::Method::PATCH, "/api/config/", Some(json!({"default_model": "missing"}))).await;
    assert_eq!((st, detail(&v)), (400, "Model 'missing' not found in config"));
    let (st, v) = web.call(reqwest::Method::PATCH, "/api/config/", Some(json!({"default_thinking": "maybe"}))).await;
    assert_eq!(st, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["body", "default_thinking"]));
    assert_eq!(v["detail"][0]["type"], "bool_parsing");
    let (st, v) = web
        .call(reqwest::Method::PATCH, "/api/config/", Some(json!({"default_model": "other", "default_thinking": true})))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["config"]["default_model"], "other");
    assert_eq!(v["restarted_session_ids"], Value::Null);
    assert_eq!(v["skipped_busy_session_ids"], Value::Null);
    let text = std::fs::read_to_string(web.env.share().join("config.toml")).unwrap();
    assert!(text.starts_with("# kept comment\ndefault_model = \"other\"\ndefault_thinking = true\n"), "{text}");

    let (st, v) = web.get("/api/config/toml").await;
    assert_eq!(st, 200);
    let content = v["content"].as_str().unwrap().to_string();
    assert!(!content.contains("sk-secret-123") && content.contains("api_key = \"********\""), "{content}");
    assert_eq!(v["path"], web.env.share().join("config.toml").to_str().unwrap());

    let put = |content: Value| web.call(reqwest::Method::PUT, "/api/config/toml", Some(json!({"content": content})));
    assert_eq!(put(json!("  ")).await, (200, json!({"success": false, "error": "Configuration text cannot be empty"})));
    let (st, v) = put(json!("{\"default_model\": \"\"}")).await;
    assert_eq!((st, v["success"].as_bool()), (200, Some(false)), "JSON is not TOML");
    let (st, v) = web.call(reqwest::Method::PUT, "/api/config/toml", Some(json!({}))).await;
    assert_eq!(st, 422, "{v}");
    let edited = content.replace("max_context_size = 1000\n", "max_context_size = 2000\n");
    assert_eq!(put(json!(edited)).await, (200, json!({"success": true, "error": null})));
    let text = std::fs::read_to_string(web.env.share().join("config.toml")).unwrap();
    assert!(text.contains("api_key = \"sk-secret-123\"") && text.contains("max_context_size = 2000"), "{text}");

    let (st, v) = web.call(reqwest::Method::POST, "/api/open-in", Some(json!({"app": "finder", "path": "/"}))).await;
    assert_eq!((st, detail(&v)), (400, "Open-in is only supported on macOS and Windows."));
    let (st, _) = web.call(reqwest::Method::POST, "/api/open-in", Some(json!({"app": "nautilus", "path": "/"}))).await;
    assert_eq!(st, 422);

    let work = std::fs::canonicalize(web.env.work()).unwrap();
    assert_eq!(web.get("/api/work-dirs/startup").await, (200, json!(work.to_str().unwrap())));
    web.create(&work).await;
    let (st, dirs) = web.get("/api/work-dirs/").await;
    assert_eq!(st, 200);
    let expected: Vec<&str> =
        if work.to_str().unwrap().contains("/tmp") { vec![] } else { vec![work.to_str().unwrap()] };
    assert_eq!(dirs, json!(expected), "temporary-looking dirs are not suggested");
    assert_eq!(web.get("/api/nothing-here").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_title_uses_its_own_provider_and_falls_back() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let scripts = web.env.dir.path().join("title.scripts.json");
    std::fs::write(&scripts, serde_json::to_string(&["text: Deploy title"]).unwrap()).unwrap();
    let config = CONFIG.replace(
        "api_key = \"sk-secret-123\"\n",
        &format!("api_key = \"sk-secret-123\"\nenv = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = \"{}\" }}\n", scripts.display()),
    );
    std::fs::write(web.env.share().join("config.toml"), config).unwrap();
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap();
    let dir = PathBuf::from(s["session_dir"].as_str().unwrap());
    let path = format!("/api/sessions/{id}/generate-title");
    // No first turn yet.
    assert_eq!(web.call(reqwest::Method::POST, &path, Some(json!({}))).await, (200, json!({"title": "Untitled"})));
    std::fs::write(
        dir.join("wire.jsonl"),
        [
            r#"{"type": "metadata", "protocol_version": "1.10"}"#,
            r#"{"timestamp": 1.0, "message": {"type": "TurnBegin", "payload": {"user_input": [{"type": "text", "text": "please deploy the service"}]}}}"#,
            r#"{"timestamp": 1.1, "message": {"type": "ContentPart", "payload": {"type": "text", "text": "Deployed."}}}"#,
            r#"{"timestamp": 1.2, "message": {"type": "TurnEnd", "payload": {}}}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let (st, v) = web.call(reqwest::Method::POST, &path, None).await;
    assert_eq!((st, v), (200, json!({"title": "Deploy title"})));
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(
        (state["custom_title"].as_str(), state["title_generated"].as_bool()),
        (Some("Deploy title"), Some(true))
    );
    // Generated once: answered from state.json, no model call (the script is used up).
    assert_eq!(web.call(reqwest::Method::POST, &path, None).await, (200, json!({"title": "Deploy title"})));
    let (_, got) = web.get(&format!("/api/sessions/{id}")).await;
    assert_eq!(got["title"], "Deploy title");

    // A model that fails: the fallback from the prompt, one attempt counted.
    std::fs::write(
        web.env.share().join("config.toml"),
        CONFIG
            .replace("_scripted_echo", "openai_legacy")
            .replace("base_url = \"\"", "base_url = \"http://127.0.0.1:9\""),
    )
    .unwrap();
    let other = web.create(&work).await;
    let other_dir = PathBuf::from(other["session_dir"].as_str().unwrap());
    let other_path = format!("/api/sessions/{}/generate-title", other["session_id"].as_str().unwrap());
    let (st, v) = web
        .call(
            reqwest::Method::POST,
            &other_path,
            Some(json!({"user_message": "  list   the files ", "assistant_response": "ok"})),
        )
        .await;
    assert_eq!((st, v), (200, json!({"title": "list the files"})));
    let state: Value = serde_json::from_str(&std::fs::read_to_string(other_dir.join("state.json")).unwrap()).unwrap();
    assert_eq!((state["title_generated"].as_bool(), state["title_generate_attempts"].as_u64()), (Some(false), Some(1)));
    let (st, v) = web
        .call(reqwest::Method::POST, "/api/sessions/00000000-0000-4000-8000-000000000000/generate-title", None)
        .await;
    assert_eq!((st, detail(&v)), (404, "Session not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_copies_the_turns_up_to_the_one_named() {
    let web = Web::start(&[]);
    let work = std::fs::canonicalize(web.env.work()).unwrap();
    let s = web.create(&work).await;
    let id = s["session_id"].as_str().unwrap().to_string();
    let path = format!("/api/sessions/{id}/fork");
    let post = |body: Option<Value>| web.call(reqwest::Method::POST, &path, body);

    // Nothing recorded yet.
    let (st, v) = post(Some(json!({"turn_index": 0}))).await;
    assert_eq!((st, detail(&v)), (400, "wire.jsonl not found"));

    // Two turns, written as the wire log records them.
    let dir = PathBuf::from(s["session_dir"].as_str().unwrap());
    let turn = |text: &str| {
        format!(
            "{{\"timestamp\": 1.0, \"message\": {{\"type\": \"TurnBegin\", \"payload\": {{\"user_input\": \"{text}\"}}}}}}\n\
             {{\"timestamp\": 1.0, \"message\": {{\"type\": \"TurnEnd\", \"payload\": {{}}}}}}\n"
        )
    };
    let wire =
        format!("{{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}}\n{}{}", turn("first"), turn("second"));
    std::fs::write(dir.join("wire.jsonl"), wire).unwrap();

    let (st, v) = post(Some(json!({"turn_index": 5}))).await;
    assert_eq!((st, detail(&v)), (400, "turn_index 5 out of range (max turn: 1)"));
    let (st, v) = post(Some(json!({"turn_index": -1}))).await;
    assert_eq!((st, v["detail"][0]["loc"].clone()), (422, json!(["body", "turn_index"])));
    let (st, v) = post(None).await;
    assert_eq!(st, 422, "{v}");

    let (st, forked) = post(Some(json!({"turn_index": 0}))).await;
    assert_eq!(st, 200, "{forked}");
    assert_eq!(forked["title"], "Fork: first");
    assert_eq!(forked["status"]["state"], "stopped");
    assert_eq!(forked["work_dir"], work.to_str().unwrap());
    assert_ne!(forked["session_id"], s["session_id"]);
    let copied =
        std::fs::read_to_string(Path::new(forked["session_dir"].as_str().unwrap()).join("wire.jsonl")).unwrap();
    assert!(copied.contains("first") && !copied.contains("second"), "{copied}");
    // The fork is listed like any session.
    let (_, list) = web.get("/api/sessions/").await;
    assert_eq!(list.as_array().unwrap().len(), 2);
}
