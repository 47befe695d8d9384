//! Finding the authorization server of an MCP server (`docs/subcommands.md` §1.6 step 2): the protected-resource
//! metadata (named by the 401's `WWW-Authenticate` header, else at its well-known places), then
//! the authorization server's metadata (RFC 8414, OpenID configuration as fallback), then the
//! endpoints at their default paths for servers that publish neither.
//!
//! A document that is found but is not a JSON object is an error, not a reason to try the next
//! place: it means a broken server, and guessing on would hide that from the user.

use reqwest::Url;
use serde_json::{Map, Value};

use super::FlowError;

/// The endpoints the flow and the refresh use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServer {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
}

/// The `resource_metadata` parameter of a `WWW-Authenticate: Bearer …` challenge.
pub fn resource_metadata_url(challenge: &str) -> Option<String> {
    let lower = challenge.to_ascii_lowercase();
    let start = lower.find("resource_metadata")? + "resource_metadata".len();
    let rest = challenge[start..].trim_start().strip_prefix('=')?.trim_start();
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_string()).filter(|v| !v.is_empty())
}

fn invalid_url(url: &str, e: impl std::fmt::Display) -> FlowError {
    FlowError::new("ValueError", format!("invalid URL {url:?}: {e}"))
}

/// `<origin>/.well-known/<name><path>` (path without its trailing `/`; none for the root).
fn well_known(base: &Url, name: &str) -> String {
    let path = base.path().trim_end_matches('/');
    format!("{}/.well-known/{name}{path}", base.origin().ascii_serialization())
}

fn origin(base: &Url) -> String {
    base.origin().ascii_serialization()
}

pub async fn discover(client: &reqwest::Client, url: &str, challenge: Option<&str>) -> Result<AuthServer, FlowError> {
    let server = Url::parse(url).map_err(|e| invalid_url(url, e))?;
    let named = challenge.and_then(resource_metadata_url);
    let candidates = match &named {
        Some(named) => vec![server.join(named).map_err(|e| invalid_url(named, e))?.to_string()],
        None => {
            let mut list = vec![well_known(&server, "oauth-protected-resource")];
            let root = format!("{}/.well-known/oauth-protected-resource", origin(&server));
            if list[0] != root {
                list.push(root);
            }
            list
        }
    };
    let issuer = match first_document(client, &candidates, "protected resource metadata").await? {
        Some((doc, from)) => {
            let first = doc.get("authorization_servers").and_then(|a| a.get(0)).and_then(Value::as_str);
            let Some(first) = first else {
                return Err(FlowError::new(
                    "OAuthFlowError",
                    format!("the protected resource metadata at {from} names no authorization server"),
                ));
            };
            first.to_string()
        }
        // Servers of the 2025-03-26 revision: the MCP server's origin is its own authorization server.
        None => origin(&server),
    };
    let issuer_url = Url::parse(&issuer).map_err(|e| invalid_url(&issuer, e))?;
    let mut candidates = vec![well_known(&issuer_url, "oauth-authorization-server")];
    candidates.push(well_known(&issuer_url, "openid-configuration"));
    let path = issuer_url.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(format!("{}{path}/.well-known/openid-configuration", origin(&issuer_url)));
    }
    let Some((doc, from)) = first_document(client, &candidates, "authorization server metadata").await? else {
        let base = origin(&issuer_url);
        return Ok(AuthServer {
            authorization_endpoint: format!("{base}/authorize"),
            token_endpoint: format!("{base}/token"),
            registration_endpoint: Some(format!("{base}/register")),
        });
    };
    let endpoint = |name: &str| doc.get(name).and_then(Value::as_str).map(str::to_string);
    let required = |name: &str| {
        endpoint(name).ok_or_else(|| {
            FlowError::new("OAuthFlowError", format!("the authorization server metadata at {from} has no {name}"))
        })
    };
    Ok(AuthServer {
        authorization_endpoint: required("authorization_endpoint")?,
        token_endpoint: required("token_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint"),
    })
}

/// The first of `candidates` that answers 2xx, as a JSON object, with the URL it came from.
async fn first_document(
    client: &reqwest::Client,
    candidates: &[String],
    what: &str,
) -> Result<Option<(Map<String, Value>, String)>, FlowError> {
    for url in candidates {
        let response = client
            .get(url)
            .header("Accept", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
            .await
            .map_err(|e| FlowError::network(&format!("cannot fetch the {what}"), &e))?;
        if !response.status().is_success() {
            continue;
        }
        let body = response.bytes().await.map_err(|e| FlowError::network(&format!("cannot read the {what}"), &e))?;
        return match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(doc)) => Ok(Some((doc, url.clone()))),
            Ok(_) => Err(FlowError::new("OAuthFlowError", format!("the {what} at {url} is not a JSON object"))),
            Err(e) => Err(FlowError::new("OAuthFlowError", format!("the {what} at {url} is not valid JSON: {e}"))),
        };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_names_the_metadata() {
        let header =
            r#"Bearer error="invalid_token", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(resource_metadata_url(header).as_deref(), Some("http://h/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(
            resource_metadata_url("Bearer Resource_Metadata=http://x/y, realm=\"a\"").as_deref(),
            Some("http://x/y")
        );
        assert_eq!(resource_metadata_url("Bearer realm=\"a\""), None);
    }

    #[test]
    fn well_known_places_keep_the_path() {
        let url = Url::parse("http://127.0.0.1:9/mcp/").unwrap();
        assert_eq!(
            well_known(&url, "oauth-protected-resource"),
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
        );
        let root = Url::parse("https://as.example").unwrap();
        assert_eq!(
            well_known(&root, "oauth-authorization-server"),
            "https://as.example/.well-known/oauth-authorization-server"
        );
    }
}
