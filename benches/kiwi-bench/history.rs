//! A long session on disk, in exactly the layout and line format kiwi writes: `kimi.json` with
//! the work dir's entry, and `sessions/<md5(work dir)>/<id>/context.jsonl` mixing messages,
//! tool calls, tool results, `_checkpoint` and `_usage` lines.

use serde_json::json;

use crate::common::Env;

/// Writes `kimi.json` and a `context.jsonl` of exactly `lines` lines for session `id` of `env`'s
/// work dir; returns its size in bytes and the number of messages in it (what a resumed kiwi
/// must send back to the model). The history repeats one turn shape: checkpoint, user,
/// checkpoint, assistant (think + text + a `SetTodoList` call), usage, tool result, checkpoint,
/// assistant answer, usage.
pub fn write_session(env: &Env, id: &str, lines: usize) -> (usize, usize) {
    let dir = env.session_dir(id);
    std::fs::create_dir_all(&dir).expect("session dir");
    let meta = json!({"work_dirs": [{"path": env.work().to_string_lossy(), "kaos": "local", "last_session_id": id}]});
    std::fs::write(env.share().join("kimi.json"), serde_json::to_string_pretty(&meta).expect("json"))
        .expect("kimi.json");

    // `_checkpoint` / `_usage` lines use Python's `json.dumps` spacing, messages the compact form.
    let mut out: Vec<String> = Vec::with_capacity(lines + 8);
    let (mut checkpoint, mut tokens, mut turn) = (0u64, 0u64, 0u64);
    let mut next_checkpoint = || {
        checkpoint += 1;
        format!(r#"{{"role": "_checkpoint", "id": {}}}"#, checkpoint - 1)
    };
    while out.len() < lines {
        let call_id = format!("SetTodoList:{turn}");
        let args = format!(r#"{{"todos": [{{"title": "item {turn}", "status": "done"}}]}}"#);
        out.push(next_checkpoint());
        out.push(json!({"role":"user","content":format!("Please continue with item {turn} of the plan.")}).to_string());
        out.push(next_checkpoint());
        out.push(
            json!({"role":"assistant","content":[
                {"type":"think","think":format!("Item {turn} needs a todo update first."),"encrypted":null},
                {"type":"text","text":"Updating the todo list."}],
                "tool_calls":[{"type":"function","id":call_id,"function":{"name":"SetTodoList","arguments":args}}]})
            .to_string(),
        );
        tokens += 120;
        out.push(format!(r#"{{"role": "_usage", "token_count": {tokens}}}"#));
        out.push(
            json!({"role":"tool","content":"<system>Todo list updated</system>","tool_call_id":call_id}).to_string(),
        );
        out.push(next_checkpoint());
        out.push(
            json!({"role":"assistant","content":format!("Item {turn} is done; the list is up to date.")}).to_string(),
        );
        tokens += 40;
        out.push(format!(r#"{{"role": "_usage", "token_count": {tokens}}}"#));
        turn += 1;
    }
    out.truncate(lines);
    let mut text = out.join("\n");
    text.push('\n');
    std::fs::write(dir.join("context.jsonl"), &text).expect("context.jsonl");
    (text.len(), out.iter().filter(|l| !l.starts_with(r#"{"role": "_"#)).count())
}
