//! What `kiwi web` costs, measured against the real binary (`cargo bench --bench web-bench`):
//!
//! 1. memory: 1,000 sessions opened in one server (each by a socket that then leaves; the
//!    session stays open), RSS per idle session; then 1,000 sessions each with one socket that
//!    stays connected, RSS per session, and what the socket adds;
//! 2. time to create a session (`POST /api/sessions/`), to open it (socket connect → the status
//!    after `history_complete`) and to answer its first prompt (`prompt` sent → its answer);
//! 3. replay: a new socket joining a 10,000-event session, events per second up to
//!    `history_complete`; a socket joining a 1,000-event session, connect → `history_complete`
//!    (the attach target: ≤ 20 ms); the wire `replay` request of the 10,000-event session over a
//!    socket (streamed from disk, paced by the client);
//! 4. fan-out: one turn of 10,000 events watched by 10 sockets, events delivered per second.
//!
//! Numbers go to stdout, one line each. `WEB_BENCH_SESSIONS` changes the session count of 1;
//! `WEB_BENCH_ONLY=memory` runs 1 alone.

#[path = "../tests/common/mod.rs"]
mod common;
mod kit;
#[path = "../tests/suite/web_kit.rs"]
mod web_kit;

use std::time::{Duration, Instant};

use serde_json::json;
use web_kit::Home;

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let idle = memory();
    with_sockets(idle);
    if std::env::var("WEB_BENCH_ONLY").is_ok_and(|v| v == "memory") {
        return;
    }
    first_prompt();
    replay();
    join();
    fan_out();
    // Last: before the one replay, a long `replay` overflowed the socket's queue (closed as too
    // slow), which ends the benchmark here.
    replay_request();
}

fn session_count() -> usize {
    std::env::var("WEB_BENCH_SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

/// What 1,000 sessions opened in one server add to its RSS: (count, KB before, KB after, the
/// time to open them). `keep`: each keeps its socket connected (a browser tab per session);
/// otherwise each socket leaves once the session is open.
fn sessions_rss(keep: bool) -> (usize, u64, u64, Duration) {
    let count = session_count();
    let home = Home::new();
    home.scripted(&["text: hi".to_string()]);
    let ids: Vec<String> = (0..count).map(|_| home.new_session()).collect();
    let server = home.serve(&[]);
    // Warm up: one session opened and left, so the baseline holds what every session shares.
    let (warm, _) = server.join(&home.new_session());
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    let before = kit::rss_kb(server.pid());
    let started = Instant::now();
    let mut sockets = Vec::new();
    for id in &ids {
        let (ws, _) = server.join(id);
        if keep {
            sockets.push(ws);
        }
    }
    let opening = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let after = kit::rss_kb(server.pid());
    drop(sockets);
    (count, before, after, opening)
}

/// KB per idle session.
fn memory() -> f64 {
    let (count, before, after, opening) = sessions_rss(false);
    let per = (after.saturating_sub(before)) as f64 / count as f64;
    println!(
        "memory: {count} idle sessions: RSS {before} KB -> {after} KB, {per:.1} KB per session \
         (opened in {:.2} s, {:.1} ms each)",
        opening.as_secs_f64(),
        opening.as_secs_f64() * 1000.0 / count as f64
    );
    per
}

/// Sessions that each keep one socket connected: what the socket adds to the session.
fn with_sockets(idle_per_session: f64) {
    let (count, before, after, _) = sessions_rss(true);
    let per = (after.saturating_sub(before)) as f64 / count as f64;
    println!(
        "memory: {count} sessions with one socket each: RSS {before} KB -> {after} KB, {per:.1} KB per session, \
         {:.1} KB per socket beyond the session",
        per - idle_per_session
    );
}

fn first_prompt() {
    let home = Home::new();
    home.scripted(&["text: Hello web".to_string()]);
    let server = home.serve(&[]);
    let rounds = 20;
    let body = json!({"work_dir": home.work()}).to_string();
    let (mut creates, mut opens, mut prompts, mut totals) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for n in 0..rounds {
        let started = Instant::now();
        let created = server.http("POST", "/api/sessions/", &[], Some(&body));
        assert_eq!(created.status, 200, "{}", created.body);
        let id = created.json()["session_id"].as_str().unwrap().to_string();
        let made = Instant::now();
        let (mut ws, _) = server.join(&id);
        let opened = Instant::now();
        let pid = format!("p{n}");
        ws.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": pid, "params": {"user_input": "hello"}}));
        ws.until(|m| m["id"] == pid.as_str() && m.get("method").is_none());
        let answered = Instant::now();
        creates.push(made - started);
        opens.push(opened - made);
        prompts.push(answered - opened);
        totals.push(answered - started);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let line = |what: &str, times: &mut Vec<Duration>| {
        times.sort();
        println!(
            "{what}: median {:.2} ms, best {:.2} ms, worst {:.2} ms ({rounds} sessions)",
            ms(times[rounds / 2]),
            ms(times[0]),
            ms(times[rounds - 1])
        );
    };
    line("create a session (POST /api/sessions/)", &mut creates);
    line("open it (socket connect -> status after history_complete)", &mut opens);
    line("first prompt (sent -> answered)", &mut prompts);
    line("all three", &mut totals);
}

/// A session whose `wire.jsonl` holds one turn of `events` records (text and thinking parts).
fn recorded_session(home: &Home, events: usize) -> String {
    let id = home.new_session();
    let text = kit::recorded_wire(events);
    std::fs::write(home.session_dir(&id).join("wire.jsonl"), text).unwrap();
    id
}

fn replay() {
    let home = Home::new();
    home.scripted(&[]);
    let events = 10_000;
    let id = recorded_session(&home, events);
    let server = home.serve(&[]);
    // The first join opens the session; the measured ones only replay.
    drop(server.join(&id));
    // End to end as a client that hands each frame on unparsed (a relay, a browser's socket):
    // connect, upgrade, every history frame, `history_complete`.
    let mut best = f64::MAX;
    for _ in 0..20 {
        let started = Instant::now();
        let mut ws = server.ws(&id, "", &[]).unwrap();
        let (history, bytes) = ws.raw_until("\"history_complete\"");
        let took = started.elapsed().as_secs_f64();
        assert_eq!(history, events, "{bytes} bytes");
        best = best.min(took);
    }
    println!(
        "replay: {events} events to a joining socket in {:.2} ms: {:.0} events/s (best of 20, connect to history_complete)",
        best * 1000.0,
        events as f64 / best
    );
    // The same with the test kit's client, which parses every frame into a JSON tree.
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let mut ws = server.ws(&id, "", &[]).unwrap();
        let (history, _) = ws.until(|m| m["method"] == "history_complete");
        let took = started.elapsed().as_secs_f64();
        assert_eq!(history.len(), events);
        assert_eq!(history[5]["params"]["payload"]["text"], "part 4 of a long answer");
        best = best.min(took);
    }
    println!(
        "replay, client parsing each frame: {:.1} ms: {:.0} events/s (best of 5)",
        best * 1000.0,
        events as f64 / best
    );
}

/// Attaching: a socket joining a running 1,000-event session, connect → `history_complete`.
fn join() {
    let home = Home::new();
    home.scripted(&[]);
    let events = 1_000;
    let id = recorded_session(&home, events);
    let server = home.serve(&[]);
    drop(server.join(&id));
    let rounds = 50;
    let mut times = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let mut ws = server.ws(&id, "", &[]).unwrap();
        let (history, _) = ws.raw_until("\"history_complete\"");
        times.push(started.elapsed());
        assert_eq!(history, events);
    }
    times.sort();
    println!(
        "join: a {events}-event session, connect -> history_complete: median {:.2} ms, best {:.2} ms, worst {:.2} ms ({rounds} joins)",
        times[rounds / 2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        times[rounds - 1].as_secs_f64() * 1000.0
    );
}

/// The wire `replay` request over a socket: every record in the current schema, then its answer.
fn replay_request() {
    let home = Home::new();
    home.scripted(&[]);
    let events = 10_000;
    let id = recorded_session(&home, events);
    let server = home.serve(&[]);
    let (mut ws, _) = server.join(&id);
    let mut best = f64::MAX;
    for n in 0..10 {
        let rid = format!("r{n}");
        let started = Instant::now();
        ws.send(json!({"jsonrpc": "2.0", "method": "replay", "id": rid}));
        let (replayed, _) = ws.raw_count_until(&format!(r#""id":"{rid}","result""#), r#""method":"event""#);
        let took = started.elapsed().as_secs_f64();
        assert_eq!(replayed, events);
        best = best.min(took);
    }
    println!(
        "replay request: {events} events over a socket in {:.2} ms: {:.0} events/s (best of 10, request to answer)",
        best * 1000.0,
        events as f64 / best
    );
}

fn fan_out() {
    let events = 10_000;
    let script: String = (0..events).map(|n| format!("text: part {n}\n")).collect();
    let home = Home::new();
    home.scripted(&[script]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let sockets = 10;
    let mut joined: Vec<web_kit::Ws> = (0..sockets).map(|_| server.join(&id).0).collect();
    let started = Instant::now();
    joined[0].send(json!({"jsonrpc": "2.0", "method": "prompt", "id": "p1", "params": {"user_input": "go"}}));
    // Clients that count frames without parsing them, so the number is kiwi's.
    let readers: Vec<_> = joined
        .into_iter()
        .map(|mut ws| {
            std::thread::spawn(move || {
                let (parts, _) = ws.raw_count_until(r#""id":"p1","result""#, r#""type":"ContentPart""#);
                (Instant::now(), parts)
            })
        })
        .collect();
    let mut last = started;
    let mut delivered = 0;
    for reader in readers {
        let (done, parts) = reader.join().unwrap();
        last = last.max(done);
        delivered += parts;
    }
    let took = (last - started).as_secs_f64();
    assert_eq!(delivered, events * sockets);
    println!(
        "fan-out: {events} events x {sockets} sockets ({delivered} ContentParts delivered) in {:.1} ms: {:.0} events/s delivered",
        took * 1000.0,
        delivered as f64 / took
    );
}
