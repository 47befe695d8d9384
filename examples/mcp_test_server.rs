//! A small MCP server over stdio for kiwi's MCP tests and benchmark, built on rmcp's server side.
//!
//! Options (command line):
//! * `--delay-ms N`: sleep before serving (a slow server, to catch the loading bracket);
//! * `--hang`: read stdin but never answer anything (a server that hangs in `initialize`);
//! * `--exit`: exit at once with status 3 (a server that fails to start);
//! * `--garbage`: answer every line with a line that is not JSON-RPC;
//! * `--pid-file PATH`: write the process id there (orphan checks);
//! * `--http`: serve Streamable HTTP on 127.0.0.1 (a free port) instead of stdio, and print the
//!   endpoint URL as the first line of stdout;
//! * `--require-header NAME:VALUE` (with `--http`): answer 401 to requests without that header.
//!
//! Tools: `echo {text}` → `pong:<text>`; `image` → a tiny PNG and a text; `audio`; `fail` → an
//! `isError` result; `boom` → a JSON-RPC error `server exploded`; `crash` → the process exits
//! mid-call; `sleep {ms}` → answers after `ms`; `env {name}` → that environment variable or
//! `<unset>`; `cwd` → the working directory.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// 1×1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

struct TestServer;

fn tools() -> Value {
    let text_arg = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let none = json!({"type": "object", "properties": {}});
    json!({"tools": [
        {"name": "echo", "description": "Answers pong with the text.", "inputSchema": text_arg},
        {"name": "image", "description": "Returns a tiny picture.", "inputSchema": none},
        {"name": "audio", "description": "Returns a short sound.", "inputSchema": none},
        {"name": "fail", "description": "Always reports a failure.", "inputSchema": none},
        {"name": "boom", "inputSchema": none},
        {"name": "crash", "description": "Makes the server exit in the middle of the call.", "inputSchema": none},
        {"name": "sleep", "description": "Waits the given number of milliseconds and then answers, a long description past fifty characters.",
         "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}},
        {"name": "env", "description": "Reads an environment variable.",
         "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        {"name": "cwd", "description": "The working directory.", "inputSchema": none},
    ]})
}

fn result(value: Value) -> Result<CallToolResponse, ErrorData> {
    let result: CallToolResult = serde_json::from_value(value).expect("a valid CallToolResult");
    Ok(result.into())
}

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}], "isError": false})
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(tools()).expect("a valid tool list"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).cloned().unwrap_or(Value::Null);
        match request.name.as_ref() {
            "echo" => result(text(format!("pong:{}", arg("text").as_str().unwrap_or("")))),
            "image" => result(json!({"content": [
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "text", "text": "a picture"}
            ]})),
            "audio" => result(json!({"content": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]})),
            "fail" => result(json!({"content": [{"type": "text", "text": "it went wrong"}], "isError": true})),
            "boom" => Err(ErrorData::internal_error("server exploded", None)),
            "crash" => {
                eprintln!("mcp_test_server: crashing on purpose");
                std::process::exit(7)
            }
            "sleep" => {
                let ms = arg("ms").as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                result(text(format!("slept {ms}")))
            }
            "env" => {
                let name = arg("name").as_str().unwrap_or("").to_string();
                result(text(std::env::var(&name).unwrap_or_else(|_| "<unset>".into())))
            }
            "cwd" => result(text(std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default())),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    if let Some(path) = value("--pid-file") {
        std::fs::write(path, std::process::id().to_string()).expect("pid file");
    }
    eprintln!("mcp_test_server: starting");
    if has("--exit") {
        std::process::exit(3);
    }
    if let Some(ms) = value("--delay-ms").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if has("--hang") || has("--garbage") {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut out = tokio::io::stdout();
        while let Ok(Some(_)) = lines.next_line().await {
            if has("--garbage") {
                let _ = out.write_all(b"this is not json-rpc\n").await;
                let _ = out.flush().await;
            }
        }
        return;
    }
    if has("--http") {
        let required = value("--require-header").map(|h| {
            let (n, v) = h.split_once(':').expect("NAME:VALUE");
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        });
        return serve_http(required).await;
    }
    let service = TestServer.serve(rmcp::transport::io::stdio()).await.expect("serve on stdio");
    let _ = service.waiting().await;
}

async fn serve_http(required: Option<(String, String)>) {
    use http_body_util::BodyExt;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    use tower_service::Service;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    println!("http://127.0.0.1:{port}/mcp");
    let service = StreamableHttpService::new(
        || Ok(TestServer),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (service, required) = (service.clone(), required.clone());
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let (mut service, required) = (service.clone(), required.clone());
                async move {
                    if let Some((name, want)) = &required
                        && request.headers().get(name.as_str()).and_then(|v| v.to_str().ok()) != Some(want.as_str())
                    {
                        let body = http_body_util::Full::new(bytes::Bytes::new()).boxed();
                        let mut denied = hyper::Response::new(body);
                        *denied.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                        return Ok::<_, std::convert::Infallible>(denied);
                    }
                    service.call(request).await
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await;
        });
    }
}
