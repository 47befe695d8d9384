//! `kiwi web` (`docs/web.md` §1): the settings from the flags, the confirmation that
//! `--dangerously-omit-auth` needs on a public address, port probing, the banner, serving until
//! SIGINT/SIGTERM, and the shutdown: every socket closed with 1012, then (the process shell)
//! every session closed and every process a tool left behind killed.
//!
//! Invariants: the `KIMI_WEB_*` variables were taken out of the environment by `src/main.rs`
//! before any thread started (`settings::web_variable`), so no tool ever sees them (the token is
//! never put there); stdout carries only the start-up lines; logs go to `<share>/logs/kiwi.log`
//! as in every mode, and to stderr at `LOG_LEVEL` (default WARNING) or `KIWI_LOG`; every line
//! logged for a session carries its id (the `session` span).

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};

use super::hosted::Hosting;
use super::listen::{Limits, fd_limit};
use super::queue::CLOSE_SHUTDOWN;
use super::settings::{
    Mode, Plan, Settings, TOKEN_VARIABLE, given_token, machine_ipv4s, max_public_path_depth, url_host,
};
use super::setup::ConfigChoice;
use super::state::AppState;
use crate::cli::{Cli, WebArgs};
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

/// Runs `kiwi web`; `cli` holds the options given before `web` (`--config-file`, `-m`).
#[allow(clippy::print_stderr)]
pub fn run(args: &WebArgs, cli: &Cli) -> ExitCode {
    let depth = max_public_path_depth(super::environment::web_variable("KIMI_WEB_MAX_PUBLIC_PATH_DEPTH"));
    let share = crate::session::store::share_dir();
    init_logging(&share);
    if cli.config.is_some() {
        eprintln!(
            "Usage: kiwi web [OPTIONS]\nTry 'kiwi web --help' for help.\n\nError: kiwi web takes its config from a \
             file: use --config-file PATH instead of --config"
        );
        return ExitCode::from(2);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let choice = ConfigChoice {
        file: args.config_file.as_ref().or(cli.config_file.as_ref()).map(|f| crate::session::store::normalize(f, &cwd)),
        model: args.model.clone().or_else(|| cli.model.clone()),
        sandbox: crate::cli::SandboxFlags {
            sandbox: args.sandbox.sandbox.or(cli.sandbox.sandbox),
            sandbox_network: args.sandbox.sandbox_network || cli.sandbox.sandbox_network,
        },
    };
    let env_token = super::environment::web_variable(TOKEN_VARIABLE);
    let given = match given_token(args, env_token) {
        Ok(given) => given,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let plan = Plan::from_args(args, given);
    if plan.needs_confirmation
        && let Err(message) = confirm_omit_auth()
    {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    let setup = match choice.setup(&share) {
        Ok((setup, warnings)) => {
            crate::startup::warn_at_start_up(&warnings);
            setup
        }
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
        let settings = Settings { max_public_path_depth: depth, config: choice, ..settings };
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
        let app = super::router::app(state);
        let stop = process.stop.clone();
        let closing = hosting.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            tracing::info!("shutting down: closing every WebSocket");
            closing.close_all_sockets(CLOSE_SHUTDOWN, "Server shutting down");
        });
        let limits = Limits::for_fd_limit(fd_limit());
        let server = super::listen::serve(listener, app, limits, process.stop.clone());
        let serving = tokio::spawn(server);
        process.stop.cancelled().await;
        match tokio::time::timeout(GRACEFUL, serving).await {
            Ok(Ok(())) => {}
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

/// Logs: `<share>/logs/kiwi.log` at INFO as in every mode, and stderr at `LOG_LEVEL` (Python's
/// level names, default WARNING); `KIWI_LOG` (tracing's syntax) wins for both. A line logged
/// inside a session's span carries `session{id=…}`.
fn init_logging(share: &Path) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let level = std::env::var("LOG_LEVEL").unwrap_or_default();
    let level = match level.trim().to_ascii_uppercase().as_str() {
        "DEBUG" => "debug",
        "INFO" => "info",
        "ERROR" | "CRITICAL" => "error",
        _ => "warn",
    };
    let filter =
        |default: &str| tracing_subscriber::EnvFilter::try_from_env("KIWI_LOG").unwrap_or_else(|_| default.into());
    let stderr =
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false).with_filter(filter(level));
    let file = crate::startup::log_writer(&crate::startup::log_file(share))
        .map(|file| tracing_subscriber::fmt::layer().with_writer(file).with_ansi(false).with_filter(filter("info")));
    let _ = tracing_subscriber::registry().with(stderr).with(file).try_init();
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
        let given = given_token(&args, None).unwrap();
        Plan::from_args(&args, given)
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
        let local = plan(&["--auth-token", "lt"]);
        let settings = Settings::bound(&local, 5495, &[], "/s".into(), "/".into());
        let text = banner(&local, &settings, &[]).join("\n");
        assert!(text.contains("  ➜  Local    http://127.0.0.1:5495/?token=lt\n"), "{text}");
        assert!(text.contains("    • Use -n / --network to share on LAN") && text.contains("  Token:   lt"));
        let omitted = plan(&["--dangerously-omit-auth"]);
        let settings = Settings::bound(&omitted, 5495, &[], "/s".into(), "/".into());
        let text = banner(&omitted, &settings, &[]).join("\n");
        assert!(text.contains("  ➜  Local    http://127.0.0.1:5495\n") && !text.contains("Token:"), "{text}");
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
