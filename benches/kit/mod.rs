//! What the benchmarks of a session's socket share (`web-bench`, `host-bench`): a process's RSS
//! and a recorded `wire.jsonl` of a given length.

/// The resident set of process `pid` in KB (`VmRSS`); 0 when it cannot be read.
pub fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The text of a `wire.jsonl` holding one turn of `events` records (text and thinking parts),
/// in the spacing kiwi writes.
pub fn recorded_wire(events: usize) -> String {
    let mut text = String::from("{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    text.push_str(
        "{\"timestamp\": 1.0, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": \"go\"}}}\n",
    );
    for n in 0..events - 2 {
        let body = if n % 2 == 0 {
            format!("{{\"type\": \"text\", \"text\": \"part {n} of a long answer\"}}")
        } else {
            format!("{{\"type\": \"think\", \"think\": \"thought {n}\", \"encrypted\": null}}")
        };
        text.push_str(&format!(
            "{{\"timestamp\": 1.5, \"message\": {{\"type\": \"ContentPart\", \"payload\": {body}}}}}\n"
        ));
    }
    text.push_str("{\"timestamp\": 2.0, \"message\": {\"type\": \"TurnEnd\", \"payload\": {}}}\n");
    text
}
