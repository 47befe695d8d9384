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
                Err(e) => tracing::warn!("ignoring the proxy {url:?}: {e}"),
            }
        }
    }
    match reqwest::Proxy::all(socks) {
        Ok(proxy) => builder.proxy(proxy.no_proxy(no_proxy())),
        Err(e) => {
            tracing::warn!("ignoring ALL_PROXY {socks:?}: {e}");
            builder
        }
    }
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
    fn socks_is_read_as_socks5() {
        let env = |v: &'static str| move |name: &str| (name == "ALL_PROXY").then(|| v.to_string());
        assert_eq!(socks_all_proxy(&env("socks://127.0.0.1:1080")).as_deref(), Some("socks5://127.0.0.1:1080"));
        assert_eq!(socks_all_proxy(&env("socks5://127.0.0.1:1080")), None, "reqwest reads it itself");
        assert_eq!(socks_all_proxy(&env("http://proxy:3128")), None);
        assert_eq!(socks_all_proxy(&|_: &str| None), None);
    }
}
