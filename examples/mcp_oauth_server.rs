//! An OAuth-protected MCP server for kiwi's OAuth tests (`tests/mcp_oauth.rs`), on 127.0.0.1:
//! the protected-resource metadata, the authorization server's metadata, dynamic registration,
//! `/authorize` (redirects straight back to the client, as a user who clicks "allow" would),
//! `/token` (authorization code with PKCE S256 check, refresh token with rotation) and a
//! Streamable HTTP MCP endpoint `/mcp` that answers 401 with a `resource_metadata` challenge
//! unless the bearer token is one it issued and has not replaced.
//!
//! Prints its MCP URL (`http://127.0.0.1:<port>/mcp`) as the first line of stdout.
//!
//! Options: `--expires-in N` (access token lifetime, default 3600); `--deny` (`/authorize`
//! sends `error=access_denied`); `--wrong-state`; `--bad-metadata` (the authorization server
//! metadata is not JSON); `--register-fails`; `--token-fails` (the code exchange is refused);
//! `--refresh-fails`. `POST /forget` drops every client and token (a server that lost its
//! state); `POST /revoke` drops the access tokens only (refresh tokens still work); `GET /log` lists what happened (`register`, `authorize`, `token:<grant>`, `mcp:401`, `call:<tool>`).
//!
//! Tools: `secret_echo {text}`, `whoami`, and `upstream_401`, whose JSON-RPC error says
//! `HTTP 401` although the server took the token (the error of an API the tool called).
//!
//! `mcp_oauth_server --browse URL` is the "browser" the tests put in `$BROWSER`: it GETs the URL
//! and follows the redirects to kiwi's callback. `--hostile-browse URL` first holds three idle
//! connections to the callback server and sends it forged callbacks (a wrong state, a missing
//! state, `error=` without the state), then does the same.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

type Body = BoxBody<Bytes, Infallible>;

#[derive(Default)]
struct Options {
    expires_in: u64,
    deny: bool,
    wrong_state: bool,
    bad_metadata: bool,
    register_fails: bool,
    token_fails: bool,
    refresh_fails: bool,
}

struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
}

#[derive(Default)]
struct State {
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Code>,
    access: HashSet<String>,
    refresh: HashMap<String, String>,
    issued: u32,
    log: Vec<String>,
}

struct Mock {
    base: String,
    options: Options,
    state: Mutex<State>,
}

struct Echo(Arc<Mock>);

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        Ok(serde_json::from_value(json!({"tools": [
            {"name": "secret_echo", "description": "Echoes the text (behind OAuth).", "inputSchema": schema},
            {"name": "whoami", "description": "Says who is asking.", "inputSchema": {"type": "object", "properties": {}}},
            {"name": "upstream_401", "description": "Calls an API that refuses it.", "inputSchema": {"type": "object", "properties": {}}},
        ]}))
        .expect("a valid tool list"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.0.log(format!("call:{}", request.name));
        let text = match request.name.as_ref() {
            "upstream_401" => {
                return Err(ErrorData::internal_error("the upstream API answered HTTP 401 Unauthorized", None));
            }
            "secret_echo" => format!("secret:{}", args.get("text").and_then(Value::as_str).unwrap_or("")),
            _ => "an authorized client".to_string(),
        };
        let result: CallToolResult =
            serde_json::from_value(json!({"content": [{"type": "text", "text": text}], "isError": false})).unwrap();
        Ok(result.into())
    }
}

fn response(status: u16, content_type: &str, body: impl Into<Bytes>) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

fn json_response(status: u16, value: Value) -> hyper::Response<Body> {
    response(status, "application/json", value.to_string())
}

fn redirect(location: &str) -> hyper::Response<Body> {
    hyper::Response::builder().status(302).header("location", location).body(Full::new(Bytes::new()).boxed()).unwrap()
}

fn pairs(query: &str) -> HashMap<String, String> {
    let url = reqwest::Url::parse(&format!("http://x/?{query}")).unwrap();
    url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

fn random(prefix: &str, n: u32) -> String {
    format!("{prefix}-{n}-{}", rand::random::<u32>())
}

impl Mock {
    fn log(&self, line: impl Into<String>) {
        self.state.lock().unwrap().log.push(line.into());
    }

    fn metadata(&self) -> Value {
        let b = &self.base;
        json!({
            "issuer": b, "authorization_endpoint": format!("{b}/authorize"), "token_endpoint": format!("{b}/token"),
            "registration_endpoint": format!("{b}/register"), "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"], "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"]
        })
    }

    fn tokens(&self, state: &mut State, client_id: &str) -> Value {
        state.issued += 1;
        let access = random("at", state.issued);
        let refresh = random("rt", state.issued);
        state.access.insert(access.clone());
        state.refresh.insert(refresh.clone(), client_id.to_string());
        json!({"access_token": access, "token_type": "bearer", "expires_in": self.options.expires_in,
               "refresh_token": refresh, "scope": "mcp"})
    }

    fn register(&self, body: &[u8]) -> hyper::Response<Body> {
        self.log("register");
        if self.options.register_fails {
            return json_response(
                400,
                json!({"error": "invalid_client_metadata", "error_description": "registration is closed"}),
            );
        }
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return json_response(400, json!({"error": "invalid_client_metadata"}));
        };
        let uris: Vec<String> = request["redirect_uris"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u.as_str().map(String::from))
            .collect();
        let mut state = self.state.lock().unwrap();
        state.issued += 1;
        let client_id = random("client", state.issued);
        state.clients.insert(client_id.clone(), uris.clone());
        let mut answer = request.clone();
        answer["client_id"] = json!(client_id);
        answer["client_id_issued_at"] = json!(1_700_000_000);
        answer["token_endpoint_auth_method"] = json!("none");
        json_response(201, answer)
    }

    fn authorize(&self, query: &str) -> hyper::Response<Body> {
        let q = pairs(query);
        let get = |k: &str| q.get(k).cloned().unwrap_or_default();
        let mut state = self.state.lock().unwrap();
        let Some(uris) = state.clients.get(&get("client_id")) else {
            return json_response(400, json!({"error": "invalid_client"}));
        };
        let redirect_uri = get("redirect_uri");
        if !uris.contains(&redirect_uri)
            || get("response_type") != "code"
            || get("code_challenge_method") != "S256"
            || get("code_challenge").is_empty()
            || get("resource") != format!("{}/mcp", self.base)
        {
            return json_response(400, json!({"error": "invalid_request"}));
        }
        state.log.push("authorize".into());
        let st = get("state");
        if self.options.deny {
            return redirect(&format!(
                "{redirect_uri}?error=access_denied&error_description=the+user+said+no&state={st}"
            ));
        }
        state.issued += 1;
        let code = random("code", state.issued);
        state.codes.insert(
            code.clone(),
            Code { client_id: get("client_id"), redirect_uri: redirect_uri.clone(), challenge: get("code_challenge") },
        );
        let st = if self.options.wrong_state { format!("not-{st}") } else { st };
        redirect(&format!("{redirect_uri}?code={code}&state={st}"))
    }

    fn token(&self, body: &[u8]) -> hyper::Response<Body> {
        let form = pairs(&String::from_utf8_lossy(body));
        let get = |k: &str| form.get(k).cloned().unwrap_or_default();
        let grant = get("grant_type");
        let mut state = self.state.lock().unwrap();
        state.log.push(format!("token:{grant}"));
        let refused = json_response(400, json!({"error": "invalid_grant"}));
        if get("resource") != format!("{}/mcp", self.base) {
            return json_response(400, json!({"error": "invalid_target"}));
        }
        match grant.as_str() {
            "authorization_code" => {
                if self.options.token_fails {
                    return refused;
                }
                let Some(code) = state.codes.remove(&get("code")) else { return refused };
                let verifier = get("code_verifier");
                let challenge =
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                if code.client_id != get("client_id")
                    || code.redirect_uri != get("redirect_uri")
                    || code.challenge != challenge
                {
                    return refused;
                }
                let tokens = self.tokens(&mut state, &code.client_id);
                json_response(200, tokens)
            }
            "refresh_token" => {
                if self.options.refresh_fails {
                    return refused;
                }
                match state.refresh.remove(&get("refresh_token")) {
                    Some(client) if client == get("client_id") => {
                        // Rotation: every access token issued so far stops working.
                        state.access.clear();
                        let tokens = self.tokens(&mut state, &client);
                        json_response(200, tokens)
                    }
                    _ => refused,
                }
            }
            _ => json_response(400, json!({"error": "unsupported_grant_type"})),
        }
    }

    fn authorized(&self, request: &hyper::Request<hyper::body::Incoming>) -> bool {
        let header = request.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
        let token = header.strip_prefix("Bearer ").unwrap_or("");
        self.state.lock().unwrap().access.contains(token)
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--browse") {
        let client = kiwi::net::client_builder().build().expect("an HTTP client");
        let _ = client.get(&args[i + 1]).send().await.and_then(|r| r.error_for_status());
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--hostile-browse") {
        return hostile_browse(&args[i + 1]).await;
    }
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let expires_in = args
        .iter()
        .position(|a| a == "--expires-in")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    let options = Options {
        expires_in,
        deny: has("--deny"),
        wrong_state: has("--wrong-state"),
        bad_metadata: has("--bad-metadata"),
        register_fails: has("--register-fails"),
        token_fails: has("--token-fails"),
        refresh_fails: has("--refresh-fails"),
    };
    serve(options).await;
}

/// A local process that found the callback port: idle connections, forged callbacks, and then
/// the user's real visit of `url`.
async fn hostile_browse(url: &str) {
    let client = kiwi::net::client_builder().build().expect("an HTTP client");
    let authorization = reqwest::Url::parse(url).expect("the authorization URL");
    let callback = authorization
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned())
        .expect("a redirect_uri");
    let port = reqwest::Url::parse(&callback).expect("the redirect URI").port().expect("a port");
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect to the callback server"));
    }
    for forged in ["code=forged&state=forged", "code=forged", "error=access_denied&state=forged", "error=access_denied"]
    {
        let _ = client.get(format!("{callback}?{forged}")).send().await;
    }
    let _ = client.get(url).send().await.and_then(|r| r.error_for_status());
    drop(idle);
}

async fn serve(options: Options) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    use tower_service::Service;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    let base = format!("http://127.0.0.1:{port}");
    println!("{base}/mcp");
    let mock = Arc::new(Mock { base, options, state: Mutex::new(State::default()) });
    let for_tools = mock.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(Echo(for_tools.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (mcp, mock) = (mcp.clone(), mock.clone());
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let (mut mcp, mock) = (mcp.clone(), mock.clone());
                async move {
                    let path = request.uri().path().to_string();
                    let query = request.uri().query().unwrap_or("").to_string();
                    let answer = match path.as_str() {
                        "/mcp" => {
                            if mock.authorized(&request) {
                                return mcp.call(request).await;
                            }
                            mock.log("mcp:401");
                            let challenge = format!(
                                "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                                mock.base
                            );
                            let mut denied = json_response(401, json!({"error": "invalid_token"}));
                            denied.headers_mut().insert("www-authenticate", challenge.parse().unwrap());
                            denied
                        }
                        "/.well-known/oauth-protected-resource/mcp" => json_response(
                            200,
                            json!({"resource": format!("{}/mcp", mock.base), "authorization_servers": [mock.base],
                                   "bearer_methods_supported": ["header"]}),
                        ),
                        "/.well-known/oauth-authorization-server" if mock.options.bad_metadata => {
                            response(200, "application/json", "<html>this is not JSON</html>")
                        }
                        "/.well-known/oauth-authorization-server" => json_response(200, mock.metadata()),
                        "/authorize" => mock.authorize(&query),
                        "/revoke" => {
                            mock.state.lock().unwrap().access.clear();
                            json_response(200, json!({}))
                        }
                        "/register" | "/token" | "/forget" => {
                            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            match path.as_str() {
                                "/register" => mock.register(&body),
                                "/token" => mock.token(&body),
                                _ => {
                                    let mut state = mock.state.lock().unwrap();
                                    state.clients.clear();
                                    state.access.clear();
                                    state.refresh.clear();
                                    json_response(200, json!({}))
                                }
                            }
                        }
                        "/log" => json_response(200, json!(mock.state.lock().unwrap().log)),
                        _ => response(404, "text/plain", "not found"),
                    };
                    Ok::<_, Infallible>(answer)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await;
        });
    }
}
