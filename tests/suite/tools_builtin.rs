//! The default toolset, agent-file tool paths, schemas and dispatch rules.

use crate::tools_support;

use std::sync::Arc;

use kiwi::config::Config;
use kiwi::config::schema::{ServiceConfig, Services};
use kiwi::llm::Capability;
use kiwi::tools::builtin::{default_tools, tool_by_path};
use serde_json::json;
use tools_support::*;

fn names(tools: &[Arc<dyn kiwi::tools::Tool>]) -> Vec<String> {
    tools.iter().map(|t| t.spec().name.clone()).collect()
}

#[test]
fn default_order_skips_unavailable_tools() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), Config::default(), &[]);
    assert_eq!(
        names(&default_tools(&rt)),
        [
            "SetTodoList",
            "Shell",
            "ReadFile",
            "Glob",
            "Grep",
            "WriteFile",
            "StrReplaceFile",
            "FetchURL",
            "AskUserQuestion",
            "EnterPlanMode",
            "ExitPlanMode",
            "TaskList",
            "TaskOutput",
            "TaskStop"
        ]
    );
    let config = Config {
        services: Services {
            moonshot_search: Some(ServiceConfig {
                base_url: "http://x".into(),
                api_key: "k".into(),
                custom_headers: Default::default(),
                oauth: None,
            }),
            moonshot_fetch: None,
        },
        ..Config::default()
    };
    let rt = runtime(dir.path(), config, &[Capability::ImageIn]);
    assert_eq!(
        names(&default_tools(&rt)),
        [
            "SetTodoList",
            "Shell",
            "ReadFile",
            "ReadMediaFile",
            "Glob",
            "Grep",
            "WriteFile",
            "StrReplaceFile",
            "SearchWeb",
            "FetchURL",
            "AskUserQuestion",
            "EnterPlanMode",
            "ExitPlanMode",
            "TaskList",
            "TaskOutput",
            "TaskStop"
        ]
    );
}

#[test]
fn tool_paths() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), Config::default(), &[]);
    let name = |p: &str| tool_by_path(p, &rt).map(|t| t.map(|t| t.spec().name.clone()));
    assert_eq!(name("kimi_cli.tools.shell:Shell"), Some(Some("Shell".into())));
    assert_eq!(name("kimi_cli.tools.ask_user:AskUserQuestion"), Some(Some("AskUserQuestion".into())));
    assert_eq!(name("kimi_cli.tools.plan:ExitPlanMode"), Some(Some("ExitPlanMode".into())));
    assert_eq!(name("kimi_cli.tools.file:Glob"), Some(Some("Glob".into())));
    assert_eq!(name("kimi_cli.tools.file.glob:Glob"), Some(Some("Glob".into())));
    assert_eq!(name("kimi_cli.tools.file.grep_local:Grep"), Some(Some("Grep".into())));
    assert_eq!(name("kimi_cli.tools.web:FetchURL"), Some(Some("FetchURL".into())));
    assert_eq!(name("kimi_cli.tools.think:Think"), Some(Some("Think".into())));
    assert_eq!(name("kimi_cli.tools.todo:SetTodoList"), Some(Some("SetTodoList".into())));
    assert_eq!(name("kimi_cli.tools.web:SearchWeb"), Some(None));
    assert_eq!(name("kimi_cli.tools.file:ReadMediaFile"), Some(None));
    assert_eq!(name("kimi_cli.tools.multiagent:Task"), Some(None));
    assert_eq!(name("kimi_cli.tools.agent:Agent"), Some(None));
    assert_eq!(name("kimi_cli.tools.background:TaskStop"), Some(Some("TaskStop".into())));
    assert_eq!(name("kimi_cli.tools.multiagent:CreateSubagent"), Some(None));
    assert_eq!(name("kimi_cli.tools.dmail:SendDMail"), Some(None));
    assert_eq!(name("kimi_cli.tools.file:Shell"), None);
    assert_eq!(name("kimi_cli.tools.filex:Glob"), None);
    assert_eq!(name("kimi_cli.tools.file:Nope"), None);
    assert_eq!(name("garbage"), None);
}

#[test]
fn schemas_have_spec_parameter_names() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), Config::default(), &[Capability::ImageIn]);
    let tools = default_tools(&rt);
    let schema = |n: &str| {
        let t = tools.iter().find(|t| t.spec().name == n).unwrap();
        serde_json::Value::Object((*t.spec().parameters).clone())
    };
    let grep = schema("Grep");
    let props = grep["properties"].as_object().unwrap();
    for key in
        ["pattern", "path", "glob", "output_mode", "-B", "-A", "-C", "-n", "-i", "type", "head_limit", "multiline"]
    {
        assert!(props.contains_key(key), "Grep lacks {key}");
    }
    assert_eq!(grep["required"], json!(["pattern"]));
    let shell = schema("Shell");
    assert_eq!(shell["properties"]["timeout"]["minimum"], json!(1));
    // 300 in the foreground, up to a day in the background (checked by the tool).
    assert_eq!(shell["properties"]["timeout"]["maximum"], json!(86400));
    assert_eq!(shell["properties"]["run_in_background"]["default"], json!(false));
    assert_eq!(shell["properties"]["timeout"]["default"], json!(60));
    let write = schema("WriteFile");
    assert_eq!(write["properties"]["mode"]["enum"], json!(["overwrite", "append"]));
    // docs/tools.md §6: `mode` defaults to `overwrite`, and the model is told so.
    assert_eq!(write["properties"]["mode"]["default"], json!("overwrite"));
    assert_eq!(write["required"], json!(["path", "content"]));
    assert_eq!(schema("Glob")["properties"]["include_dirs"]["default"], json!(true));
    assert_eq!(schema("ReadFile")["properties"]["line_offset"]["default"], json!(1));
    let sr = schema("StrReplaceFile");
    assert!(sr["properties"]["edit"]["anyOf"].is_array(), "{sr}");
    assert_eq!(schema("ReadFile")["properties"]["n_lines"]["default"], json!(1000));
    for t in &tools {
        assert!(!t.spec().description.is_empty());
        for placeholder in ["{max", "{shell}", "{kinds}"] {
            assert!(!t.spec().description.contains(placeholder), "{}", t.spec().name);
        }
    }
    assert!(tools.iter().find(|t| t.spec().name == "Shell").unwrap().spec().description.contains("bash (`/"));
}

#[tokio::test]
async fn unknown_tool_and_bad_json() {
    let h = harness(true);
    let r = h.call("Think", json!({"thought": "x"})).await;
    assert_eq!(r.message, "Tool `Think` not found");
    assert_eq!(brief(&r), Some("Tool `Think` not found"));
    let r = h.call_raw("ReadFile", Some("{")).await;
    assert_eq!(brief(&r), Some("Invalid arguments"));
    assert!(r.message.starts_with("Error parsing JSON arguments:"));
    let r = h.call_raw("Glob", None).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
}
