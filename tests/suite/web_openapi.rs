//! `GET /openapi.json` of `kiwi web` (`docs/web.md` §7): served under the API's guards, an
//! OpenAPI 3.1 document that a published validator accepts (PyPI `openapi-spec-validator`,
//! installed into a venv under `target/tmp/` on first use; skipped with the reason where PyPI
//! cannot be reached), and every operation it lists is one the server serves (a request to it
//! is never answered as an unknown path or a wrong method).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::web_kit::Home;

const VALIDATOR: &str = "openapi-spec-validator==0.9.0";

fn validator_ready(python: &Path) -> bool {
    Command::new(python).args(["-c", "import openapi_spec_validator"]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn the_document_is_guarded_valid_and_served_whole() {
    let home = Home::new();
    home.scripted(&[]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let refused = server.http("GET", "/openapi.json", &[("Authorization", "Bearer wrong")], None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    // The Origin rule of the API's reads, whichever it is in this mode.
    let evil = [("Origin", "http://evil.example")];
    let api = server.http("GET", "/api/work-dirs/", &evil, None);
    assert_eq!(server.http("GET", "/openapi.json", &evil, None).status, api.status);
    let public = home.serve(&["-n", "--public", "--auth-token", "t"]);
    let evil = [("Authorization", "Bearer t"), ("Origin", "http://evil.example")];
    let foreign = public.http("GET", "/openapi.json", &evil, None);
    assert_eq!((foreign.status, foreign.body.as_str()), (403, r#"{"detail":"Origin not allowed"}"#));
    drop(public);
    let (status, doc) = server.get_json("/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["x-websockets"]["/api/acp"]["frames"].is_string(), "{}", doc["x-websockets"]);

    // Every documented operation is served: deletions last (they remove the session).
    let mut operations: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.push((method.to_uppercase(), path.clone()));
        }
    }
    assert!(operations.len() >= 20, "{operations:?}");
    operations.sort_by_key(|(method, _)| method == "DELETE");
    for (method, path) in &operations {
        let concrete = path.replace("{session_id}", &id).replace("{path}", "notes.txt");
        let response = server.http(method, &concrete, &[], None);
        let unknown = response.status == 404 && response.body == r#"{"detail":"Not Found"}"#;
        assert!(!unknown && response.status != 405, "{method} {concrete}: {} {}", response.status, response.body);
    }

    let python = match crate::pypi::venv_with("openapi-validator-venv", VALIDATOR, validator_ready) {
        Ok(python) => python,
        Err(reason) => return crate::npm::skip("the OpenAPI validation", &reason),
    };
    let file = home.dir.path().join("openapi.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let script = "import json, sys\nfrom openapi_spec_validator import validate\n\
                  validate(json.load(open(sys.argv[1])))\nprint('valid')";
    let checked = Command::new(&python).args(["-c", script]).arg(&file).output().unwrap();
    let said = String::from_utf8_lossy(&checked.stdout).to_string() + &String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success() && said.contains("valid"), "{said}");
    assert_eq!(doc["info"]["version"], Value::String(env!("CARGO_PKG_VERSION").into()));
}
