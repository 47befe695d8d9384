//! Cost and dollar budgets (issue 32 §3, `docs/configuration.md` §2.4 "Cost"): the same two
//! priced turns give the same dollars on every front end — the wire's `cost` extension (only for
//! a client that asks), ACP's `usage_update.cost`, the Claude dialect's `total_cost_usd` and
//! `modelUsage`, kiwi web's socket — the sum is saved with the session and a resume continues it,
//! and a dollar budget ends each protocol's turn its own way.

use crate::common::{self, Env, Kiwi, types};
use crate::print_support::{Dirs, run};

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// Dollars per million tokens: input, output, cache read, cache write.
fn prices() -> Value {
    json!({"input": 2, "output": 10, "cache_read": 0.5, "cache_write": 2.5})
}

/// Turn one: 1000·2 + 500·10 + 2000·0.5 + 400·2.5 = 9000 µ$ = $0.009. Turn two: 3000·2 +
/// 1000·10 = 16000 µ$ = $0.016. The session: $0.025.
const TURN_ONE: &str = "text: one\nusage: input_other=1000 output=500 input_cache_read=2000 input_cache_creation=400";
const TURN_TWO: &str = "text: two\nusage: input_other=3000 output=1000";

fn priced() -> Value {
    json!({"models": {"scripted": {"usd_per_mtok": prices()}}})
}

/// A step that calls a tool and costs $0.009, then one that must never run under a budget below it.
fn budget_scripts() -> Vec<&'static str> {
    vec![
        "text: working\ntool_call: {\"id\": \"t1\", \"name\": \"SetTodoList\", \"arguments\": \"{\\\"todos\\\": []}\"}\n\
         usage: input_other=1000 output=500 input_cache_read=2000 input_cache_creation=400",
        "text: never",
    ]
}

fn status_costs(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["params"]["type"] == "StatusUpdate")
        .filter_map(|e| e["params"]["payload"].get("cost").cloned())
        .collect()
}

fn wire_two_turns(k: &mut Kiwi) -> Vec<Vec<Value>> {
    let mut all = Vec::new();
    for (id, text) in [("p1", "first"), ("p2", "second")] {
        let (events, response) = k.prompt(id, json!(text));
        assert_eq!(response["result"], json!({"status": "finished"}), "{response}");
        all.push(events);
    }
    all
}

fn initialize_asking(k: &mut Kiwi, extensions: Value) -> Value {
    k.call("init", "initialize", json!({"protocol_version": "1.10", "extensions": extensions})).1
}

/// The compatibility rule: a wire client that does not ask sees exactly what it saw without
/// prices — every frame, member for member and in order — the `initialize` answer included.
#[test]
fn a_wire_client_that_does_not_ask_sees_the_same_frames_as_without_prices() {
    let env = Env::new();
    let mut seen = Vec::new();
    for (name, extra) in [("plain", json!({})), ("priced", priced())] {
        let config = env.named_scripted_config(name, &[TURN_ONE, TURN_TWO], extra);
        let mut k = env.spawn(&config, &[]);
        let init = k.call("init", "initialize", json!({"protocol_version": "1.10"})).1;
        let turns = wire_two_turns(&mut k);
        let lines: Vec<String> =
            std::iter::once(&init).chain(turns.iter().flatten()).map(|v| serde_json::to_string(v).unwrap()).collect();
        assert!(!lines.iter().any(|l| l.contains("cost")), "{lines:?}");
        seen.push(lines);
    }
    assert_eq!(seen[0], seen[1]);
    // Asking for other extensions only does not bring it either.
    let config = env.named_scripted_config("fork-only", &[TURN_ONE, TURN_TWO], priced());
    let mut k = env.spawn(&config, &[]);
    let init = initialize_asking(&mut k, json!(["fork"]));
    assert!(init["result"].get("cost").is_none(), "{init}");
    assert!(status_costs(&wire_two_turns(&mut k).concat()).is_empty());
}

/// A client that asks gets the `cost` member on each priced step's `StatusUpdate` and in the
/// `initialize` answer; the sum is saved and a resumed session continues it.
#[test]
fn a_wire_client_that_asks_gets_step_turn_and_session_dollars_continued_on_resume() {
    let env = Env::new();
    let config = env.scripted_config_with(&[TURN_ONE, TURN_TWO], priced());
    let mut k = env.spawn(&config, &["-S", "priced"]);
    let init = initialize_asking(&mut k, json!(["cost"]));
    assert_eq!(init["result"]["extensions"], json!(["cost"]), "{init}");
    assert_eq!(init["result"]["cost"], json!({"session_usd": 0.0, "max_budget_usd": null}), "{init}");
    let (events, response) = k.prompt("p1", json!("first"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(status_costs(&events), [json!({"step_usd": 0.009, "turn_usd": 0.009, "session_usd": 0.009})]);
    // The member follows the reference's seven.
    let status = events.iter().find(|e| e["params"]["type"] == "StatusUpdate").unwrap();
    let keys: Vec<&String> = status["params"]["payload"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "context_usage",
            "context_tokens",
            "max_context_tokens",
            "token_usage",
            "message_id",
            "plan_mode",
            "mcp_status",
            "cost"
        ]
    );
    let (events, _) = k.prompt("p2", json!("second"));
    assert_eq!(status_costs(&events), [json!({"step_usd": 0.016, "turn_usd": 0.016, "session_usd": 0.025})]);
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let state = read_json(&env.session_dir("priced").join("state.json"));
    assert_eq!(state["cost"], json!({"usd": 0.025, "complete": true}));
    // A new process of the same session goes on from $0.025 (its script starts over: the
    // $0.009 turn again).
    let mut k = env.spawn(&config, &["-S", "priced"]);
    let init = initialize_asking(&mut k, json!(["cost"]));
    assert_eq!(init["result"]["cost"]["session_usd"], 0.025, "{init}");
    let (events, _) = k.prompt("p3", json!("again"));
    assert_eq!(status_costs(&events), [json!({"step_usd": 0.009, "turn_usd": 0.009, "session_usd": 0.034})]);
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Without prices the cost is unknown: no member even for a client that asks, `null` in
/// `initialize`, nothing saved.
#[test]
fn without_prices_the_cost_is_unknown_not_zero() {
    let env = Env::new();
    let config = env.scripted_config(&[TURN_ONE, TURN_TWO]);
    let mut k = env.spawn(&config, &["-S", "unpriced"]);
    let init = initialize_asking(&mut k, json!(["cost"]));
    assert_eq!(init["result"]["cost"], json!({"session_usd": null, "max_budget_usd": null}), "{init}");
    assert!(status_costs(&wire_two_turns(&mut k).concat()).is_empty());
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let state = env.session_dir("unpriced").join("state.json");
    assert!(!state.exists() || !std::fs::read_to_string(&state).unwrap().contains("cost"));
}

#[test]
fn the_wire_ends_a_turn_at_the_dollar_budget() {
    let env = Env::new();
    let config = env.scripted_config_with(&budget_scripts(), priced());
    let mut k = env.spawn(&config, &["--max-budget-usd", "0.005"]);
    k.initialize();
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(
        response["result"],
        json!({"status": "budget_reached", "cost_usd": 0.009, "max_budget_usd": 0.005}),
        "{response}"
    );
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ToolResult", "TurnEnd"]
    );
    // Spent stays spent: the next prompt ends before any model call.
    let (events, response) = k.prompt("p1", json!("more"));
    assert_eq!(response["result"]["status"], "budget_reached");
    assert_eq!(types(&events), ["TurnBegin", "TurnEnd"]);
}

/// A dollar budget without prices cannot be kept: said once on stderr at start-up, and every
/// turn is refused with a readable error before it spends anything.
#[test]
fn a_dollar_budget_without_prices_is_refused_clearly() {
    let env = Env::new();
    let config = env.scripted_config(&[TURN_ONE]);
    let (stderr, answer) = common::prompt_once(env.command(&config, &["--max-budget-usd", "1", "--log-stderr"]));
    assert!(stderr.contains("a dollar budget of $1.00 is set but model scripted has no prices"), "{stderr}");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "BudgetError: Cannot keep the dollar budget ($1.00): model 'scripted_echo' has no prices in the config (usd_per_mtok)"
    );
}

#[test]
fn bad_budgets_and_prices_are_start_up_errors() {
    let env = Env::new();
    let config = env.scripted_config(&[TURN_ONE]);
    let out = env.command(&config, &["--max-budget-usd", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected US dollars above 0, got '0'"));
    let bad = env.named_scripted_config(
        "bad",
        &[TURN_ONE],
        json!({"models": {"scripted": {"usd_per_mtok": {"input": -1, "output": 1}}}}),
    );
    let out = env.command(&bad, &[]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("usd_per_mtok.input must be a number of dollars per million tokens, 0 or more"),
        "{stderr}"
    );
}

// --- ACP ---

fn acp_prompt(k: &mut Kiwi, id: &str, session: &str, text: &str) -> (Vec<Value>, Value) {
    k.call(id, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
}

fn usage_updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == "usage_update")
        .map(|m| m["params"]["update"].clone())
        .collect()
}

fn acp_session(env: &Env, config: &Path, extra: &[&str]) -> (Kiwi, String) {
    let mut k = Kiwi::spawn(env.acp_command(config, extra));
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {"auth": {}}}));
    assert!(init.get("result").is_some(), "{init}");
    let (_, r) = k.call("new", "session/new", json!({"cwd": env.work(), "mcpServers": []}));
    (k, r["result"]["sessionId"].as_str().unwrap().to_string())
}

#[test]
fn acp_usage_updates_carry_the_sessions_dollars() {
    let env = Env::new();
    let config = env.scripted_config_with(&[TURN_ONE, TURN_TWO], priced());
    let (mut k, session) = acp_session(&env, &config, &[]);
    let mut amounts = Vec::new();
    for (id, text) in [("p1", "first"), ("p2", "second")] {
        let (during, answer) = acp_prompt(&mut k, id, &session, text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let usage = usage_updates(&during);
        assert_eq!(usage.len(), 1, "{during:?}");
        assert_eq!(usage[0]["cost"]["currency"], "USD");
        amounts.push(usage[0]["cost"]["amount"].clone());
    }
    assert_eq!(amounts, [json!(0.009), json!(0.025)]);
    // Without prices: the update without `cost`, as before.
    let plain = env.named_scripted_config("plain", &[TURN_ONE], json!({}));
    let (mut k, session) = acp_session(&env, &plain, &[]);
    let (during, _) = acp_prompt(&mut k, "p1", &session, "first");
    let usage = usage_updates(&during);
    assert_eq!(usage.len(), 1);
    assert!(usage[0].get("cost").is_none(), "{usage:?}");
}

#[test]
fn acp_ends_a_turn_at_the_dollar_budget_with_max_tokens() {
    let env = Env::new();
    let config = env.scripted_config_with(&budget_scripts(), priced());
    let (mut k, session) = acp_session(&env, &config, &["--max-budget-usd", "0.005"]);
    let (_, answer) = acp_prompt(&mut k, "p1", &session, "go");
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
}

// --- print modes ---

const CLAUDE: &[&str] = &["--output-format", "stream-json", "--input-format", "stream-json", "--verbose"];

fn user_line(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}}).to_string()
}

#[test]
fn claude_results_carry_total_cost_usd_and_model_usage_cost() {
    let d = Dirs::new();
    let config = d.scripted_with(&[TURN_ONE, TURN_TWO], priced());
    let input = format!("{}\n{}\n", user_line("first"), user_line("second"));
    let r = run(d.command(&config, CLAUDE), &input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let results: Vec<Value> = r.lines().into_iter().filter(|l| l["type"] == "result").collect();
    assert_eq!(results.len(), 2);
    let totals: Vec<&Value> = results.iter().map(|r| &r["total_cost_usd"]).collect();
    assert_eq!(totals, [&json!(0.009), &json!(0.025)]);
    assert_eq!(results[1]["modelUsage"]["scripted_echo"]["costUSD"], json!(0.025));
    assert_eq!(results[1]["modelUsage"]["scripted_echo"]["inputTokens"], json!(4000));
    // Without prices: 0, as Claude Code says when it knows none (and the line as before).
    let plain = d.scripted_with(&[TURN_ONE], json!({}));
    let r = run(d.command(&plain, CLAUDE), &format!("{}\n", user_line("first")));
    let text = r.stdout.lines().find(|l| l.contains("\"type\":\"result\"")).unwrap().to_string();
    assert!(text.contains("\"total_cost_usd\":0,"), "{text}");
    assert!(text.contains("\"costUSD\":0,"), "{text}");
}

#[test]
fn claude_ends_at_max_budget_usd_with_its_own_subtype() {
    let d = Dirs::new();
    let config = d.scripted_with(&budget_scripts(), priced());
    let args = ["-p", "--verbose", "--output-format", "stream-json", "--max-budget-usd", "0.005", "go"];
    let r = run(d.command(&config, &args), "");
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(!r.stderr.contains("--max-budget-usd"), "the option is no longer ignored: {}", r.stderr);
    let result = r.lines().into_iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["subtype"], "error_max_budget_usd");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["total_cost_usd"], json!(0.009));
    assert_eq!(result["errors"], json!(["Reached maximum budget ($0.005)"]));
    assert!(result.get("result").is_none());
}

/// kimi's print dialect shows no cost (its lines are the reference's), but its session's sum is
/// the same dollars, saved for the next front end to continue.
#[test]
fn kimi_print_sessions_count_the_same_dollars() {
    let d = Dirs::new();
    let config = d.scripted_with(&[TURN_ONE, TURN_TWO], priced());
    let input = "{\"role\":\"user\",\"content\":\"first\"}\n{\"role\":\"user\",\"content\":\"second\"}\n";
    let args = ["--print", "--input-format", "stream-json", "--output-format", "stream-json", "-S", "kp"];
    let r = run(d.command(&config, &args), input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains("cost"), "{}", r.stdout);
    let state = read_json(&crate::print_support::session_dir(&d, "kp").join("state.json"));
    assert_eq!(state["cost"], json!({"usd": 0.025, "complete": true}));
}

#[test]
fn kimi_print_ends_at_the_config_budget() {
    let d = Dirs::new();
    let budget = json!({"models": {"scripted": {"usd_per_mtok": prices()}}, "loop_control": {"max_budget_usd": 0.005}});
    let config = d.scripted_with(&budget_scripts(), budget);
    let r = run(d.command(&config, &["--print", "-p", "go"]), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Session budget reached: $0.0090 of $0.0050"), "{}", r.stderr);
}

// --- kiwi web ---

fn web_home(scripts: &[&str]) -> super::web_kit::Home {
    let home = super::web_kit::Home::new();
    home.scripted(&scripts.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let path = home.share().join("config.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str("\n[models.scripted.usd_per_mtok]\ninput = 2\noutput = 10\ncache_read = 0.5\ncache_write = 2.5\n");
    std::fs::write(&path, config).unwrap();
    home
}

fn web_turn(ws: &mut super::web_kit::Ws, id: &str, text: &str) -> Vec<Value> {
    ws.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": id, "params": {"user_input": text}}));
    let (events, answer) = ws.until(|m| m["id"] == id && m.get("method").is_none());
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    events
}

/// kiwi web: the socket of a session whose client asked for `cost` (as kiwi's own UI does) gets
/// the same dollars; one that did not ask gets the reference's frames.
#[test]
fn web_sockets_show_cost_to_a_client_that_asks() {
    let home = web_home(&[TURN_ONE, TURN_TWO, TURN_ONE]);
    let asked = home.new_session();
    let plain = home.new_session();
    let server = home.serve(&[]);
    let (mut ws, _) = server.join(&asked);
    let params = json!({"protocol_version": "1.10", "extensions": ["fork", "undo", "cost"]});
    let init = ws.call("init", "initialize", params).1;
    assert_eq!(init["result"]["cost"], json!({"session_usd": 0.0, "max_budget_usd": null}), "{init}");
    let mut costs = status_costs(&web_turn(&mut ws, "p1", "first"));
    costs.extend(status_costs(&web_turn(&mut ws, "p2", "second")));
    assert_eq!(
        costs,
        [
            json!({"step_usd": 0.009, "turn_usd": 0.009, "session_usd": 0.009}),
            json!({"step_usd": 0.016, "turn_usd": 0.016, "session_usd": 0.025})
        ]
    );
    let (mut other, _) = server.join(&plain);
    let init = other.call("init", "initialize", json!({"protocol_version": "1.10"})).1;
    assert!(init["result"].get("cost").is_none(), "{init}");
    let events = web_turn(&mut other, "q1", "first");
    assert!(events.iter().any(|e| e["params"]["type"] == "StatusUpdate"));
    assert!(status_costs(&events).is_empty(), "{events:?}");
}

/// The sum belongs to the session, whichever front end runs it: a wire session's dollars go on
/// in the Claude dialect's `--resume`.
#[test]
fn a_resume_in_another_front_end_continues_the_sum() {
    let env = Env::new();
    let config = env.scripted_config_with(&[TURN_ONE, TURN_TWO], priced());
    let id = uuid::Uuid::new_v4().to_string();
    let mut k = env.spawn(&config, &["-S", &id]);
    k.initialize();
    wire_two_turns(&mut k);
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["-p", "--verbose", "--output-format", "stream-json", "--resume", &id, "again"])
        .arg("--config-file")
        .arg(&config)
        .arg("--work-dir")
        .arg(env.work())
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share());
    for var in common::SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let r = run(cmd, "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let result = r.lines().into_iter().find(|l| l["type"] == "result").unwrap();
    // $0.025 before, and the script's first turn ($0.009) again.
    assert_eq!(result["total_cost_usd"], json!(0.034), "{result}");
    assert_eq!(result["modelUsage"]["scripted_echo"]["costUSD"], json!(0.009), "this run's calls");
}
