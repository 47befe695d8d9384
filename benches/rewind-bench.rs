//! rewind-bench: what `fork` and `undo` (`docs/sessions.md` §8, §9) cost on a 10,000-event session.
//!
//! Run: `cargo bench --bench rewind-bench`. Nothing asserts on timings. A session of 2,500 turns
//! (TurnBegin with its context mark, StepBegin, ContentPart, TurnEnd: 10,000 records in
//! `wire.jsonl`, 7,500 lines of `context.jsonl`) is written as kiwi writes it, the last 50 turns
//! each with a 4 KiB file edit in the before-image store. One `kiwi --wire` process serves it;
//! for each call it prints the time from request to answer and the bytes the process wrote
//! meanwhile (`wchar` of `/proc/<pid>/io`: every byte handed to `write`, answers on stdout
//! included):
//! * `fork` of everything and of the first half (turn 1249),
//! * `undo` of the last turn (one file restored),
//! * `undo` from turn 1250 on (1,249 turns, 49 files restored).
//!
//! Set `KIWI_BIN` to measure another build the same way.
#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::time::Instant;

use kiwi::session::rewind::EditJournal;
use serde_json::{Value, json};

const TURNS: u64 = 2500;
const EDITED_TURNS: u64 = 50;
const FILE_BYTES: usize = 4096;

fn wchar(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("wchar: ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Writes the session into `dir` and its edited files into `work`.
fn write_session(dir: &Path, work: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut wire = String::from("{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    // kiwi's sessions open their context with the system prompt record (marks count it).
    let mut context = String::from("{\"role\": \"_system_prompt\", \"content\": \"You are a benchmark.\"}\n");
    let journal = EditJournal::new(dir, kiwi::session::rewind::DEFAULT_MAX_BYTES);
    for t in 0..TURNS {
        let offset = wire.len() as u64;
        let mark = format!("{{\"rotation\": 0, \"bytes\": {}}}", context.len());
        let ts = 1_700_000_000.0 + t as f64;
        wire.push_str(&format!(
            "{{\"timestamp\": {ts}, \"message\": {{\"type\": \"TurnBegin\", \"payload\": {{\"user_input\": \"prompt number {t} with some text to make it longer\"}}}}, \"kiwi_context\": {mark}}}\n"
        ));
        wire.push_str(&format!(
            "{{\"timestamp\": {ts}, \"message\": {{\"type\": \"StepBegin\", \"payload\": {{\"n\": 1}}}}}}\n"
        ));
        wire.push_str(&format!(
            "{{\"timestamp\": {ts}, \"message\": {{\"type\": \"ContentPart\", \"payload\": {{\"type\": \"text\", \"text\": \"{}\"}}}}}}\n",
            "answer ".repeat(20)
        ));
        wire.push_str(&format!("{{\"timestamp\": {ts}, \"message\": {{\"type\": \"TurnEnd\", \"payload\": {{}}}}}}\n"));
        context.push_str(&format!("{{\"role\": \"_checkpoint\", \"id\": {t}}}\n"));
        context.push_str(&format!("{{\"role\":\"user\",\"content\":\"prompt number {t}\"}}\n"));
        context.push_str(&format!("{{\"role\":\"assistant\",\"content\":\"{}\"}}\n", "answer ".repeat(20)));
        if t >= TURNS - EDITED_TURNS {
            journal.begin_turn(offset, Some(Default::default())).unwrap();
            let path = work.join(format!("file_{t}.txt"));
            let before = vec![b'b'; FILE_BYTES];
            let after = vec![b'a'; FILE_BYTES];
            std::fs::write(&path, &after).unwrap();
            journal.record(&path, Some(&before), &after);
        }
    }
    std::fs::write(dir.join("wire.jsonl"), wire).unwrap();
    std::fs::write(dir.join("context.jsonl"), context).unwrap();
}

fn main() {
    let bin = std::env::var("KIWI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kiwi").to_string());
    let env = common::Env::new();
    let config = env.scripted_config(&[]);
    let work = env.work();
    let id = "0b5e2d3a-7a8e-4a3c-9d51-0e6f1c2a9b10";
    let dir = env.session_dir(id);
    write_session(&dir, &work);
    let source = size(&dir.join("wire.jsonl")) + size(&dir.join("context.jsonl"));
    let cmd = common::with_kiwi_bin(env.command(&config, &["--session", id]));
    let mut k = common::Kiwi::spawn(cmd);
    k.initialize();
    let pid = k.child.id();
    println!(
        "kiwi --wire ({bin}); a session of {} records in wire.jsonl, {} bytes of wire.jsonl + context.jsonl:",
        TURNS * 4,
        source
    );
    let mut measure = |label: &str, method: &str, params: Value| {
        let before = wchar(pid);
        let t0 = Instant::now();
        let (_, r) = k.call(label, method, params);
        let took = t0.elapsed();
        let written = wchar(pid) - before;
        assert!(r.get("result").is_some(), "{label}: {r}");
        let detail = match method {
            "undo" => format!(
                "{} turns undone, {} files restored",
                r["result"]["turns_undone"],
                r["result"]["restored"].as_array().map_or(0, Vec::len)
            ),
            _ => format!("session {}", r["result"]["session_id"].as_str().unwrap_or("")),
        };
        println!("  {label:<32} {:>9.2} ms  {written:>10} bytes written  ({detail})", took.as_secs_f64() * 1000.0);
    };
    measure("fork (everything)", "fork", json!({}));
    measure("fork (after turn 1249)", "fork", json!({"turn_index": 1249}));
    measure("undo (the last turn)", "undo", json!({}));
    measure("undo (from turn 1250: 1249 turns)", "undo", json!({"turn_index": 1250}));
    println!(
        "  after the undos: wire.jsonl {} bytes, context.jsonl {} bytes",
        size(&dir.join("wire.jsonl")),
        size(&dir.join("context.jsonl"))
    );
    k.close_stdin();
    k.wait_exit(common::TIMEOUT);
}
