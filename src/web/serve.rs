//! `kiwi web` (`docs/web.md` §1): the settings from the flags, the confirmation that
//! `--dangerously-omit-auth` needs on a public address, port probing, the banner, serving until
//! SIGINT/SIGTERM, and the shutdown: every socket closed with 1012, then (the process shell)
//! every session closed and every process a tool left behind killed.
//!
//! Invariants: the `KIMI_WEB_*` variables are read once and removed from the environment before
//! any thread starts, so no tool ever sees them (the token is never put there); stdout carries
//! only the start-up lines; logs go to stderr at `LOG_LEVEL` (default WARNING) or `KIWI_LOG`.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};

use super::hosted::Hosting;
use super::queue::CLOSE_SHUTDOWN;
use super::settings::{Mode, Plan, Settings, machine_ipv4s, max_public_path_depth, url_host};
use super::state::AppState;
use crate::builder::{AgentChoice, AgentSetup};
use crate::cli::WebArgs;
use crate::live::{Runtime, shell};
use crate::rpc::Outbound;

/// Ports tried after the first.
const PORT_TRIES: u16 = 10;
/// How long after start the browser is opened.
const OPEN_DELAY: Duration = Duration::from_millis(1500);
/// How long shutdown waits for open connections after closing the sockets.
const GRACEFUL: Duration = Duration::from_secs(3);
/// Worker threads: sessions of different sockets run side by side.
const WORKERS: usize = 2;
/// The phrase `--dangerously-omit-auth` on a public address needs.
const CONFIRMATION: &str = "I UNDERSTAND THE RISKS";

/// Runs `kiwi web`.
#[allow(clippy::print_stderr)]
pub fn run(args: &WebArgs) -> ExitCode {
    let depth = max_public_path_depth(std::env::var("KIMI_WEB_MAX_PUBLIC_PATH_DEPTH").ok());
    scrub_web_environment();
    let _logging = init_logging();
    let plan = Plan::from_args(args);
    if plan.needs_confirmation
        && let Err(message) = confirm_omit_auth()
    {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    let share = crate::session::store::share_dir();
    let setup = match default_setup(&share, args.sandbox) {
        Ok(setup) => setup,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let startup_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let open = args.open_browser();
    let first_port = args.port;
    let served = shell::run(Runtime::MultiThread(WORKERS), std::io::stdout(), |process| async move {
        let Some((listener, port)) = bind(&plan.host, first_port, &process.outbound).await else {
            eprintln!("Cannot find available port in range {first_port}-{}", first_port.saturating_add(PORT_TRIES - 1));
            return ExitCode::FAILURE;
        };
        let addresses = machine_ipv4s();
        let settings = Settings::bound(&plan, port, &addresses, share, startup_dir);
        let settings = Settings { max_public_path_depth: depth, ..settings };
        for line in banner(&plan, &settings, &addresses) {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            process.outbound.send_raw(bytes).await;
        }
        let hosting = Hosting::new(setup, process.sessions.clone(), crate::VERSION.to_string());
        let state = AppState::new(settings, hosting.clone());
        super::rest::install(&state);
        if open {
            let url = browser_url(&plan, &state.settings);
            tokio::spawn(async move {
                tokio::time::sleep(OPEN_DELAY).await;
                crate::browser::open(&url);
            });
        }
        let app = super::router::app(state).into_make_service_with_connect_info::<SocketAddr>();
        let stop = process.stop.clone();
        let closing = hosting.clone();
        // Frames are small and written as they come: without TCP_NODELAY a frame written while
        // the previous one is unacknowledged waits for the client's delayed ACK (~40 ms).
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            stop.cancelled().await;
            tracing::info!("shutting down: closing every WebSocket");
            closing.close_all_sockets(CLOSE_SHUTDOWN, "Server shutting down");
        });
        let serving = tokio::spawn(async move { server.await });
        process.stop.cancelled().await;
        match tokio::time::timeout(GRACEFUL, serving).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("the HTTP server failed: {e}"),
            Ok(Err(e)) => tracing::warn!("the HTTP server task failed: {e}"),
            Err(_) => tracing::info!("connections still open after {GRACEFUL:?}; closing anyway"),
        }
        ExitCode::SUCCESS
    });
    match served {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", e.0);
            ExitCode::FAILURE
        }
    }
}

/// Removes `KIMI_WEB_*` from the environment (`docs/web.md` §8 item 1), while the process has
/// one thread.
fn scrub_web_environment() {
    let names: Vec<std::ffi::OsString> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_string_lossy().starts_with("KIMI_WEB_"))
        .collect();
    for name in names {
        // SAFETY: called at the start of `kiwi web`, before the runtime, the logger or any other
        // thread exists, so nothing reads the environment concurrently.
        unsafe { std::env::remove_var(&name) };
    }
}

/// Logs on stderr: `KIWI_LOG` (tracing's syntax) wins, else `LOG_LEVEL` (Python's level names,
/// default WARNING).
fn init_logging() -> Option<()> {
    let level = std::env::var("LOG_LEVEL").unwrap_or_default();
    let level = match level.trim().to_ascii_uppercase().as_str() {
        "DEBUG" => "debug",
        "INFO" => "info",
        "ERROR" | "CRITICAL" => "error",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KIWI_LOG").unwrap_or_else(|_| level.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init().ok()
}

/// The boxed warning and the phrase, read from a terminal only.
#[allow(clippy::print_stdout)]
fn confirm_omit_auth() -> Result<(), String> {
    let lines = [
        "SECURITY WARNING",
        "",
        "Authentication is disabled (--dangerously-omit-auth) while the server",
        "listens on a public address: anyone who can reach it controls your agent.",
        "",
        &format!("Type '{CONFIRMATION}' to continue."),
    ];
    let width = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 2;
    println!("╔{}╗", "═".repeat(width));
    for line in lines {
        println!("║ {line:<w$} ║", w = width - 2);
    }
    println!("╚{}╝", "═".repeat(width));
    if !std::io::stdin().is_terminal() {
        return Err("Refusing to start without auth in non-interactive mode.".into());
    }
    print!("> ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == CONFIRMATION { Ok(()) } else { Err("Aborted by user.".into()) }
}

/// What hosted sessions are built from: the default config file (`<share>/config.toml`) with
/// its defaults and no command-line overrides, and the global `mcp.json` when it reads
/// (`docs/web.md` §4.8). `Err` is the config's error text.
///
/// `--sandbox`/`--sandbox-network` are the one command-line override (spec sandbox.md §2.7):
/// they win over `[sandbox]`; the sandbox is probed here (fail closed), against the directory
/// kiwi web was started in (each command's policy uses its session's work dir).
pub fn default_setup(share: &Path, flags: crate::cli::SandboxFlags) -> Result<AgentSetup, String> {
    std::fs::create_dir_all(share).map_err(|e| format!("Cannot create {}: {e}", share.display()))?;
    let (config, path, warnings) = crate::config::load_default_reporting(share).map_err(|e| e.to_string())?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    let probe_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let (sandbox, warnings) = crate::agent_env::SandboxRun::start(
        config.sandbox.clone(),
        flags.sandbox,
        flags.sandbox_network,
        share,
        [path.clone(), share.join("mcp.json")].into_iter().filter(|p| p.is_file()).collect(),
        &probe_dir,
        &[],
    )
    .map_err(|line| format!("{line}\nSee logs: {}", share.join("logs").join("kiwi.log").display()))?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok(AgentSetup {
        config: Arc::new(config),
        share_dir: share.to_path_buf(),
        model: None,
        thinking: None,
        agent: AgentChoice::Default,
        skills_dir: None,
        yolo: false,
        config_source: path.display().to_string(),
        system_prompt: Default::default(),
        mcp_configs: global_mcp(share),
        invocation: Default::default(),
        sandbox,
    })
}

/// `<share>/mcp.json`: invalid JSON or an invalid server table is logged and left out.
fn global_mcp(share: &Path) -> Vec<serde_json::Value> {
    let path = share.join("mcp.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Vec::new() };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(doc) => match crate::mcp::server_table(std::slice::from_ref(&doc)) {
            Ok(_) => vec![doc],
            Err(e) => {
                tracing::warn!("{} is not a valid MCP config ({e}); sessions start without MCP", path.display());
                Vec::new()
            }
        },
        Err(e) => {
            tracing::warn!("{} is not valid JSON ({e}); ignored", path.display());
            Vec::new()
        }
    }
}

/// Binds the first free port of `first`..`first+9` (address reuse on), saying so when the first
/// was busy.
async fn bind(host: &str, first: u16, out: &Outbound) -> Option<(TcpListener, u16)> {
    for offset in 0..PORT_TRIES {
        let Some(port) = first.checked_add(offset) else { break };
        let Some(addr) = resolve(host, port).await else { continue };
        let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() };
        let Ok(socket) = socket else { continue };
        let _ = socket.set_reuseaddr(true);
        if socket.bind(addr).is_err() {
            continue;
        }
        let Ok(listener) = socket.listen(1024) else { continue };
        if offset > 0 {
            let line = format!("Port {first} is in use, using port {port} instead\n");
            out.send_raw(line.into_bytes()).await;
        }
        return Some((listener, port));
    }
    None
}

async fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    tokio::net::lookup_host((host, port)).await.ok()?.next()
}

/// The start-up lines (`docs/web.md` §1.6).
pub fn banner(plan: &Plan, settings: &Settings, addresses: &[std::net::Ipv4Addr]) -> Vec<String> {
    let port = settings.port;
    let with_token = |url: String| match &settings.token {
        Some(token) => format!("{url}/?token={}", percent_encode(token)),
        None => url,
    };
    let mut urls: Vec<(&str, String)> = Vec::new();
    if plan.host == "0.0.0.0" {
        urls.push(("Local", with_token(format!("http://localhost:{port}"))));
        for ip in addresses {
            if !plan.lan_only || super::settings::is_private(IpAddr::V4(*ip)) {
                urls.push(("Network", with_token(format!("http://{ip}:{port}"))));
            }
        }
    } else {
        let label = if plan.public_mode { "Network" } else { "Local" };
        urls.push((label, with_token(format!("http://{}:{port}", url_host(&plan.host)))));
    }
    let rule = "─".repeat(60);
    let mut lines =
        vec![String::new(), "  🥝 kiwi".to_string(), "  WEB UI (Technical Preview)".to_string(), format!("  {rule}")];
    for (label, url) in urls {
        lines.push(format!("  ➜  {label:<8} {url}"));
    }
    if let Some(token) = &settings.token {
        lines.push(String::new());
        lines.push(format!("  Token:   {token}"));
    } else if plan.public_mode {
        lines.push(String::new());
        lines.push("  ⚠ AUTH DISABLED - Anyone on the network can access".into());
    }
    if settings.restrict_sensitive_apis {
        lines.push("  ⚠ Sensitive APIs are restricted".into());
    }
    lines.push(format!("  {rule}"));
    match plan.mode() {
        Mode::Local => lines.extend([
            "  Tips:".to_string(),
            "    • Use -n / --network to share on LAN".into(),
            "    • Use --network --public for public access".into(),
        ]),
        Mode::Lan => lines.extend([
            "  Mode: LAN only (private IPs)".to_string(),
            String::new(),
            "  Tips:".into(),
            "    • Use --public to allow public access".into(),
            "    • ⚠ Public mode allows access from any IP".into(),
        ]),
        Mode::Public => lines.extend([
            "  ⚠ Mode: PUBLIC (all networks)".to_string(),
            "    Anyone with the URL can access this instance".into(),
            String::new(),
            "  Security tips:".into(),
            "    • Keep your auth token secure".into(),
            "    • Consider using firewall or VPN".into(),
        ]),
    }
    lines.push(String::new());
    lines
}

/// The page the browser opens: `localhost` for a server on every interface, else the bind host.
fn browser_url(plan: &Plan, settings: &Settings) -> String {
    let host = if plan.host == "0.0.0.0" { "localhost".to_string() } else { url_host(&plan.host) };
    let url = format!("http://{host}:{}", settings.port);
    match &settings.token {
        Some(token) => format!("{url}/?token={}", percent_encode(token)),
        None => url,
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn plan(list: &[&str]) -> Plan {
        let cli = Cli::try_parse_from(["kiwi", "web"].iter().chain(list.iter())).unwrap();
        let Some(Command::Web(args)) = cli.command else { unreachable!() };
        Plan::from_args(&args)
    }

    #[test]
    fn the_public_banner() {
        let plan = plan(&["-n", "--public", "--auth-token", "tok 1"]);
        let ips = [std::net::Ipv4Addr::new(192, 0, 2, 2)];
        let settings = Settings::bound(&plan, 5494, &ips, "/s".into(), "/".into());
        let text = banner(&plan, &settings, &ips).join("\n");
        for line in [
            "WEB UI (Technical Preview)",
            "  ➜  Local    http://localhost:5494/?token=tok%201",
            "  ➜  Network  http://192.0.2.2:5494/?token=tok%201",
            "  Token:   tok 1",
            "  ⚠ Sensitive APIs are restricted",
            "  ⚠ Mode: PUBLIC (all networks)",
            "    • Consider using firewall or VPN",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }

    #[test]
    fn the_local_and_lan_banners() {
        let local = plan(&[]);
        let settings = Settings::bound(&local, 5495, &[], "/s".into(), "/".into());
        let text = banner(&local, &settings, &[]).join("\n");
        assert!(text.contains("  ➜  Local    http://127.0.0.1:5495\n"), "{text}");
        assert!(text.contains("    • Use -n / --network to share on LAN") && !text.contains("Token:"));
        let lan = plan(&["-n", "--auth-token", "t"]);
        let ips = [std::net::Ipv4Addr::new(8, 8, 8, 8), std::net::Ipv4Addr::new(10, 0, 0, 5)];
        let settings = Settings::bound(&lan, 5494, &ips, "/s".into(), "/".into());
        let text = banner(&lan, &settings, &ips).join("\n");
        assert!(text.contains("http://10.0.0.5:5494/?token=t") && !text.contains("8.8.8.8"), "{text}");
        assert!(text.contains("  Mode: LAN only (private IPs)") && !text.contains("restricted"));
        let open = plan(&["-n", "--dangerously-omit-auth"]);
        let settings = Settings::bound(&open, 5494, &[], "/s".into(), "/".into());
        assert!(
            banner(&open, &settings, &[]).join("\n").contains("  ⚠ AUTH DISABLED - Anyone on the network can access")
        );
        assert_eq!(
            browser_url(&lan, &Settings::bound(&lan, 7, &[], "/s".into(), "/".into())),
            "http://localhost:7/?token=t"
        );
    }
}
