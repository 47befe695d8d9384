//! HTTP clients. reqwest is built without a bundled crypto provider (ring is ours, no C build);
//! every client goes through `client_builder`, which installs it first.

use std::sync::Once;

static CRYPTO: Once = Once::new();

/// A reqwest builder that is safe to `build()`: the rustls crypto provider is installed. Proxies
/// come from the environment (`docs/configuration.md` §4): `HTTPS_PROXY`, `HTTP_PROXY` and
/// `ALL_PROXY` (`socks5://`, `socks5h://`, and `socks://`, read as `socks5://`), minus `NO_PROXY`.
pub fn client_builder() -> reqwest::ClientBuilder {
    CRYPTO.call_once(|| {
        // Fails only when another provider is already the default, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let builder = reqwest::Client::builder();
    match socks_all_proxy(&|name| std::env::var(name).ok()) {
        Some(url) => with_socks_alias(builder, &url, &|name| std::env::var(name).ok()),
        None => builder,
    }
}

/// `ALL_PROXY` (or `all_proxy`) when it uses the `socks://` spelling, rewritten as `socks5://`;
/// reqwest reads every other spelling itself.
fn socks_all_proxy(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let value = env("ALL_PROXY").or_else(|| env("all_proxy")).filter(|v| !v.trim().is_empty())?;
    let rest = value.trim().strip_prefix("socks://")?;
    Some(format!("socks5://{rest}"))
}

/// The environment's proxies set by hand, because one spelling reqwest does not know is among
/// them: the scheme-specific ones first, then the SOCKS one for everything, minus `NO_PROXY`.
fn with_socks_alias(
    mut builder: reqwest::ClientBuilder,
    socks: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> reqwest::ClientBuilder {
    let no_proxy = || reqwest::NoProxy::from_env();
    for (names, https) in [(["HTTPS_PROXY", "https_proxy"], true), (["HTTP_PROXY", "http_proxy"], false)] {
        if let Some(url) = names.iter().find_map(|n| env(n)).filter(|v| !v.trim().is_empty()) {
            let made = if https { reqwest::Proxy::https(url.trim()) } else { reqwest::Proxy::http(url.trim()) };
            match made {
                Ok(proxy) => builder = builder.proxy(proxy.no_proxy(no_proxy())),
                Err(e) => {
                    tracing::warn!("ignoring the proxy {:?}: {}", loggable_url(&url), scrub(&e.to_string(), &url))
                }
            }
        }
    }
    match reqwest::Proxy::all(socks) {
        Ok(proxy) => builder.proxy(proxy.no_proxy(no_proxy())),
        Err(e) => {
            tracing::warn!("ignoring ALL_PROXY {:?}: {}", loggable_url(socks), scrub(&e.to_string(), socks));
            builder
        }
    }
}

/// A URL as it may appear in a log: user info and query (which can hold passwords and keys) are
/// replaced by `<redacted>`, whether or not the text parses as a URL (an unusable proxy URL is
/// logged too; issue 30 item 11).
pub fn loggable_url(url: &str) -> String {
    let url = url.trim();
    if let Ok(mut parsed) = reqwest::Url::parse(url)
        && parsed.has_host()
    {
        let had_user = !parsed.username().is_empty() || parsed.password().is_some();
        let had_query = parsed.query().is_some();
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        parsed.set_query(None);
        let mut text = parsed.to_string();
        if had_user && let Some(at) = text.find("://") {
            text.insert_str(at + 3, "<redacted>@");
        }
        if had_query {
            text.push_str("?<redacted>");
        }
        return text;
    }
    let (before_query, query) = match url.find('?') {
        Some(i) => (&url[..i], true),
        None => (url, false),
    };
    let (scheme, rest) = match before_query.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), before_query),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("<redacted>@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let mut text = format!("{scheme}{host}{path}");
    if query {
        text.push_str("?<redacted>");
    }
    text
}

/// `text` (an error about `url`) without `url`'s user info and query.
fn scrub(text: &str, url: &str) -> String {
    let mut out = text.to_string();
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    if let Some(at) = authority.rfind('@') {
        out = out.replace(&authority[..at], "<redacted>");
    }
    if let Some(i) = url.find('?') {
        out = out.replace(&url[i + 1..], "<redacted>");
    }
    out
}

/// An error with its causes: reqwest's own text stops at "error sending request for url (…)" and
/// hides why ("Connection refused", "operation timed out") in its source chain.
pub fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_hide_user_info_and_queries() {
        assert_eq!(loggable_url("https://u:p@h.example/v1?key=k"), "https://<redacted>@h.example/v1?<redacted>");
        assert_eq!(loggable_url("https://h.example/v1"), "https://h.example/v1");
        // Unusable URLs are logged too: nothing of the user info or the query survives.
        for bad in ["socks5://user:hunter2@127.0.0.1:notaport", "socks5://u:hunter2@[::1:1080/x?k=hunter2", "hunter2@x"]
        {
            let shown = loggable_url(bad);
            assert!(!shown.contains("hunter2"), "{bad} -> {shown}");
        }
        assert_eq!(loggable_url("socks5://user:pw@127.0.0.1:notaport"), "socks5://<redacted>@127.0.0.1:notaport");
        let said = scrub("invalid port in socks5://user:pw@h:x?t=abc", "socks5://user:pw@h:x?t=abc");
        assert_eq!(said, "invalid port in socks5://<redacted>@h:x?<redacted>");
    }

    #[test]
    fn socks_is_read_as_socks5() {
        let env = |v: &'static str| move |name: &str| (name == "ALL_PROXY").then(|| v.to_string());
        assert_eq!(socks_all_proxy(&env("socks://127.0.0.1:1080")).as_deref(), Some("socks5://127.0.0.1:1080"));
        assert_eq!(socks_all_proxy(&env("socks5://127.0.0.1:1080")), None, "reqwest reads it itself");
        assert_eq!(socks_all_proxy(&env("http://proxy:3128")), None);
        assert_eq!(socks_all_proxy(&|_: &str| None), None);
    }
}
