//! What `kiwi web`'s flags mean (`docs/web.md` §1): the bind host, the three modes (local, LAN,
//! public), the token, the allowed origins, the restriction of sensitive APIs, and the address
//! rules the guards use (which client addresses are private, which hosts are local).
//!
//! Invariants: a token is always required unless the user asked for none with
//! `--dangerously-omit-auth` — on loopback too, unlike the reference (`docs/web.md` §5: any local
//! process or user could otherwise drive the agent); the user's token comes from `--auth-token`,
//! `--auth-token-file` or `KIWI_WEB_AUTH_TOKEN`, else a random one is made; Origin enforcement and the sensitive-API restriction default to on exactly in
//! public mode with `--public`; nothing here reads or writes the process environment.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use base64::Engine as _;
use rand::RngCore as _;

use crate::cli::WebArgs;

/// The depth of a path the file API serves in restricted mode when the environment says nothing.
pub const DEFAULT_PUBLIC_PATH_DEPTH: usize = 6;

/// The settings decided before a port is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The address to bind.
    pub host: String,
    /// The bind host is not a loopback name (`--network`, or `--host` with another address).
    pub public_mode: bool,
    pub token: Option<String>,
    pub lan_only: bool,
    pub enforce_origin: bool,
    pub restrict_sensitive_apis: bool,
    /// `--allowed-origins`, cleaned.
    pub origins: Vec<String>,
    /// `--dangerously-omit-auth` in public mode: the user must confirm.
    pub needs_confirmation: bool,
}

impl Plan {
    /// The plan of `args`; `given` is the user's token ([`given_token`]), if any.
    pub fn from_args(args: &WebArgs, given: Option<String>) -> Self {
        let host = bind_host(args);
        let public_mode = !is_local_host(&host);
        let lan_only = args.lan_only_flag();
        let token = if args.dangerously_omit_auth { None } else { Some(given.unwrap_or_else(random_token)) };
        Self {
            public_mode,
            token,
            lan_only,
            enforce_origin: public_mode && !lan_only,
            restrict_sensitive_apis: args.restrict_flag().unwrap_or(public_mode && !lan_only),
            origins: args.allowed_origins.as_deref().map(parse_origins).unwrap_or_default(),
            needs_confirmation: args.dangerously_omit_auth && public_mode,
            host,
        }
    }

    /// The mode, as the banner names it.
    pub fn mode(&self) -> Mode {
        match (self.public_mode, self.lan_only) {
            (false, _) => Mode::Local,
            (true, true) => Mode::Lan,
            (true, false) => Mode::Public,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Local,
    Lan,
    Public,
}

/// Everything the server runs with, once the port is bound.
#[derive(Debug, Clone)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub public_mode: bool,
    pub token: Option<String>,
    pub lan_only: bool,
    pub enforce_origin: bool,
    pub restrict_sensitive_apis: bool,
    /// The configured list, or the automatic one in public mode; empty = the loopback pattern.
    pub allowed_origins: Vec<String>,
    /// The share dir (`$KIMI_SHARE_DIR`, else `~/.kimi`).
    pub share_dir: PathBuf,
    /// The server's working directory at start (`GET /api/work-dirs/startup`).
    pub startup_dir: PathBuf,
    /// `KIMI_WEB_MAX_PUBLIC_PATH_DEPTH` or [`DEFAULT_PUBLIC_PATH_DEPTH`].
    pub max_public_path_depth: usize,
    /// The config file and model the sessions are built from.
    pub config: super::setup::ConfigChoice,
}

impl Settings {
    /// The plan on its bound port; `addresses` are the machine's non-loopback IPv4 addresses
    /// (for the automatic origins of a server bound to every interface).
    pub fn bound(plan: &Plan, port: u16, addresses: &[Ipv4Addr], share_dir: PathBuf, startup_dir: PathBuf) -> Self {
        let mut origins = plan.origins.clone();
        if origins.is_empty() && plan.public_mode {
            origins.push(format!("http://localhost:{port}"));
            origins.push(format!("http://127.0.0.1:{port}"));
            if plan.host == "0.0.0.0" {
                origins.extend(addresses.iter().map(|a| format!("http://{a}:{port}")));
            } else {
                origins.push(format!("http://{}:{port}", url_host(&plan.host)));
            }
        }
        Self {
            host: plan.host.clone(),
            port,
            public_mode: plan.public_mode,
            token: plan.token.clone(),
            lan_only: plan.lan_only,
            enforce_origin: plan.enforce_origin,
            restrict_sensitive_apis: plan.restrict_sensitive_apis,
            allowed_origins: origins,
            share_dir,
            startup_dir,
            max_public_path_depth: DEFAULT_PUBLIC_PATH_DEPTH,
            config: Default::default(),
        }
    }

    /// Settings for tests of the HTTP stack: local mode on `port`.
    pub fn local(port: u16, share_dir: PathBuf) -> Self {
        let plan = Plan {
            host: "127.0.0.1".into(),
            public_mode: false,
            token: None,
            lan_only: true,
            enforce_origin: false,
            restrict_sensitive_apis: false,
            origins: Vec::new(),
            needs_confirmation: false,
        };
        Self::bound(&plan, port, &[], share_dir, PathBuf::from("/"))
    }

    /// The bind host is `127.0.0.1`, `localhost` or `::1`.
    pub fn local_mode(&self) -> bool {
        !self.public_mode
    }

    /// Whether a browser page at `origin` may call the API (the CORS rule, `docs/web.md` §2.2):
    /// the configured list (`*` allows all), else `http(s)://localhost|127.0.0.1[:port]`.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        if self.allowed_origins.is_empty() {
            return loopback_origin(origin);
        }
        self.allowed_origins.iter().any(|o| o == "*" || o == origin)
    }
}

/// The environment variable that may carry the token (a flag is visible in the process list).
pub const TOKEN_VARIABLE: &str = "KIWI_WEB_AUTH_TOKEN";

/// The user's token: `--auth-token`, else the first line of `--auth-token-file`, else `env` (the
/// value of [`TOKEN_VARIABLE`]); `None` when none is given. An unreadable or empty file, or an
/// empty value, is an error (the start-up line), not a silent fallback to a random token.
pub fn given_token(args: &WebArgs, env: Option<String>) -> Result<Option<String>, String> {
    if let Some(token) = &args.auth_token {
        return non_empty(token.clone(), "--auth-token").map(Some);
    }
    if let Some(path) = &args.auth_token_file {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("Cannot read the token file {}: {e}", path.display()))?;
        let first = text.lines().next().unwrap_or("").trim().to_string();
        return non_empty(first, &format!("The token file {}", path.display())).map(Some);
    }
    env.map(|token| non_empty(token.trim().to_string(), TOKEN_VARIABLE)).transpose()
}

fn non_empty(token: String, source: &str) -> Result<String, String> {
    if token.is_empty() { Err(format!("{source} gives an empty token")) } else { Ok(token) }
}

/// `--host`, else `0.0.0.0` with `--network`, else `127.0.0.1`.
pub fn bind_host(args: &WebArgs) -> String {
    match &args.host {
        Some(host) => host.clone(),
        None if args.network => "0.0.0.0".into(),
        None => "127.0.0.1".into(),
    }
}

pub fn is_local_host(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

/// A host as it appears in a URL (IPv6 in brackets).
pub fn url_host(host: &str) -> String {
    if host.contains(':') { format!("[{host}]") } else { host.to_string() }
}

/// `--allowed-origins`: items trimmed, a trailing `/` removed, empty items dropped.
pub fn parse_origins(text: &str) -> Vec<String> {
    text.split(',').map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect()
}

/// `^https?://(localhost|127\.0\.0\.1)(:\d+)?$`.
fn loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let (host, port) = match rest.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    };
    (host == "localhost" || host == "127.0.0.1")
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// 32 random bytes, URL-safe base64 without padding (43 characters).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `KIMI_WEB_MAX_PUBLIC_PATH_DEPTH`: decimal digits only, 0 or anything else means the default.
pub fn max_public_path_depth(value: Option<String>) -> usize {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_PUBLIC_PATH_DEPTH)
}

/// A client address the LAN-only rule lets in: private, loopback or link-local in the sense of
/// Python's `ipaddress` (`docs/web.md` §2.2); an IPv4-mapped IPv6 address counts by its IPv4
/// part. CGNAT (`100.64.0.0/10`) is not private.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => private_v4(v4),
            None => private_v6(v6),
        },
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    let n = u32::from(ip);
    let within = |net: u32, bits: u32| (n ^ net) >> (32 - bits) == 0;
    o[0] == 0
        || o[0] == 10
        || o[0] == 127
        || (o[0] == 169 && o[1] == 254)
        || within(0xAC10_0000, 12)
        || within(0xC000_0000, 29)
        || within(0xC000_0200, 24)
        || (o[0] == 192 && o[1] == 168)
        || within(0xC612_0000, 15)
        || within(0xC633_6400, 24)
        || within(0xCB00_7100, 24)
        || o[0] >= 240
}

fn private_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    ip.is_loopback()
        || ip.is_unspecified()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        // The other IANA special-purpose blocks Python counts as private: 64:ff9b:1::/48,
        // 100::/64 and 2001::/23.
        || (s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001)
        || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0)
        || (s[0] == 0x2001 && s[1] < 0x0200)
}

/// The machine's IPv4 addresses other than loopback, in interface order.
pub fn machine_ipv4s() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we only read and then free once.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut cursor = list;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cursor };
        if !entry.ifa_addr.is_null() {
            // SAFETY: `ifa_addr` points to a sockaddr whose family says how to read it.
            let family = unsafe { (*entry.ifa_addr).sa_family };
            if i32::from(family) == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && !out.contains(&ip) {
                    out.push(ip);
                }
            }
        }
        cursor = entry.ifa_next;
    }
    // SAFETY: the list came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(list) };
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(list: &[&str]) -> WebArgs {
        let cli = Cli::try_parse_from(["kiwi", "web"].iter().chain(list.iter())).unwrap();
        match cli.command {
            Some(Command::Web(w)) => w,
            _ => unreachable!(),
        }
    }

    fn plan(args: &WebArgs) -> Plan {
        Plan::from_args(args, given_token(args, None).unwrap())
    }

    #[test]
    fn the_three_modes() {
        let local = plan(&args(&[]));
        assert_eq!((local.host.as_str(), local.mode()), ("127.0.0.1", Mode::Local));
        assert_eq!(local.token.as_ref().map(String::len), Some(43), "a token on loopback too");
        assert!(!local.enforce_origin && !local.restrict_sensitive_apis && local.lan_only);
        let lan = plan(&args(&["-n"]));
        assert_eq!((lan.host.as_str(), lan.mode()), ("0.0.0.0", Mode::Lan));
        assert_eq!(lan.token.as_ref().map(String::len), Some(43));
        assert!(!lan.enforce_origin && !lan.restrict_sensitive_apis);
        let public = plan(&args(&["-n", "--public", "--auth-token", "tok123"]));
        assert_eq!((public.mode(), public.token.as_deref()), (Mode::Public, Some("tok123")));
        assert!(public.enforce_origin && public.restrict_sensitive_apis);
        let open = plan(&args(&["-n", "--public", "--no-restrict-sensitive-apis"]));
        assert!(!open.restrict_sensitive_apis);
        let omit = plan(&args(&["-n", "--dangerously-omit-auth"]));
        assert!(omit.token.is_none() && omit.needs_confirmation);
        let omit_local = plan(&args(&["--dangerously-omit-auth", "--auth-token", "x"]));
        assert!(omit_local.token.is_none() && !omit_local.needs_confirmation);
        let omit_loopback = plan(&args(&["--dangerously-omit-auth"]));
        assert!(omit_loopback.token.is_none() && !omit_loopback.needs_confirmation);
        assert_eq!(plan(&args(&["-h", "::1", "-n"])).mode(), Mode::Local);
        assert_eq!(plan(&args(&["--host", "192.168.1.2"])).mode(), Mode::Lan);
    }

    #[test]
    fn the_token_from_a_flag_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  from-file \nignored\n").unwrap();
        let file_arg = file.to_str().unwrap();
        let given = |list: &[&str], env: Option<&str>| given_token(&args(list), env.map(str::to_string));
        assert_eq!(given(&["--auth-token", "flag"], Some("env")), Ok(Some("flag".into())));
        assert_eq!(given(&["--auth-token-file", file_arg], Some("env")), Ok(Some("from-file".into())));
        assert_eq!(given(&[], Some(" env ")), Ok(Some("env".into())));
        assert_eq!(given(&[], None), Ok(None));
        assert_eq!(given(&[], Some("  ")), Err("KIWI_WEB_AUTH_TOKEN gives an empty token".into()));
        assert_eq!(given(&["--auth-token", ""], None), Err("--auth-token gives an empty token".into()));
        let missing = given(&["--auth-token-file", "/nonexistent/kiwi-token"], None).unwrap_err();
        assert!(missing.starts_with("Cannot read the token file /nonexistent/kiwi-token: "), "{missing}");
        std::fs::write(&file, "\n").unwrap();
        assert!(given(&["--auth-token-file", file_arg], None).unwrap_err().ends_with("gives an empty token"));
        let from_env = Plan::from_args(&args(&[]), given(&[], Some("e")).unwrap());
        assert_eq!(from_env.token.as_deref(), Some("e"));
    }

    #[test]
    fn origins() {
        assert_eq!(parse_origins(" http://a:1/ ,, https://b ,"), ["http://a:1", "https://b"]);
        let public = plan(&args(&["-n", "--public"]));
        let s = Settings::bound(&public, 5495, &[Ipv4Addr::new(192, 0, 2, 2)], "/s".into(), "/".into());
        assert_eq!(s.allowed_origins, ["http://localhost:5495", "http://127.0.0.1:5495", "http://192.0.2.2:5495"]);
        assert!(s.origin_allowed("http://192.0.2.2:5495/") && !s.origin_allowed("http://evil.example"));
        let link_local = plan(&args(&["-h", "fe80::1"]));
        let s = Settings::bound(&link_local, 1, &[], "/s".into(), "/".into());
        assert_eq!(s.allowed_origins[2], "http://[fe80::1]:1");
        let local = Settings::local(5494, "/s".into());
        assert!(local.allowed_origins.is_empty());
        for ok in ["http://localhost", "https://127.0.0.1:8080", "http://localhost:5494/"] {
            assert!(local.origin_allowed(ok), "{ok}");
        }
        for bad in ["http://localhost.evil", "http://localhost:", "ftp://localhost", "http://127.0.0.1:80x", "null"] {
            assert!(!local.origin_allowed(bad), "{bad}");
        }
        let star = Plan { origins: vec!["*".into()], ..plan(&args(&[])) };
        assert!(Settings::bound(&star, 1, &[], "/s".into(), "/".into()).origin_allowed("http://anything"));
    }

    #[test]
    fn private_addresses() {
        for ip in [
            "10.1.2.3",
            "127.0.0.1",
            "169.254.1.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "192.0.2.5",
            "198.18.0.1",
            "0.0.0.0",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "100.64.0.1", "172.32.0.1", "192.169.0.1", "2606:4700::1", "::ffff:8.8.8.8"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn path_depth_and_tokens() {
        assert_eq!(max_public_path_depth(None), 6);
        assert_eq!(max_public_path_depth(Some("9".into())), 9);
        for bad in ["0", "-3", "x", "", "1.5"] {
            assert_eq!(max_public_path_depth(Some(bad.into())), 6, "{bad}");
        }
        let (a, b) = (random_token(), random_token());
        assert!(a.len() == 43 && a != b && a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert!(!machine_ipv4s().iter().any(|ip| ip.is_loopback()));
    }
}
