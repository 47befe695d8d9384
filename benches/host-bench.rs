//! What hosting a session on `live.sock` costs (`docs/host.md`, spec host.md §6), measured
//! against the real binary: `cargo bench --bench host-bench`.
//!
//! 1. attach: a raw `UnixStream` client connecting to a `kiwi --wire` host of a 1,000-event
//!    session, connect → `history_complete` (target ≤ 20 ms; median and best of 50);
//! 2. live latency: the host's own stdio client and one attached socket client read the same
//!    events; for each event, when the socket client read it minus when the stdio client read
//!    it (target ≤ 1 ms), over 30 one-part turns and one turn of 2,000 parts;
//! 3. memory: the host's RSS with 0 and with 100 attached socket clients, per client (target
//!    ≤ 50 KB; the baseline after one turn to one client), idle and after a 1,000-part turn
//!    reached them all (`web-bench` measures a
//!    browser socket the same way);
//! 4. replay throughput: the one history replay (`live::History::stream` with
//!    `wire::replay::history_frame`) over a 100,000-event `wire.jsonl` on disk, in this process
//!    (target ≥ 1.5 M events/s); the same records through the current-schema path of the wire
//!    `replay` (`session::wire_read::parse` + `wire::frames::event_frame`) for comparison; and
//!    a socket client attaching to a 100,000-event session, end to end.
//!
//! Numbers go to stdout, one line each; nothing asserts on timings. `HOST_BENCH_ONLY=attach`,
//! `latency`, `memory` or `replay` runs one section; `KIWI_BIN=path` measures another build of
//! kiwi (sections 1-3 and the socket replay of 4).

#[path = "../tests/common/mod.rs"]
mod common;
mod kit;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::Env;
use kiwi::wire::replay::{BATCH, history_frame};
use serde_json::json;

fn main() {
    let only = std::env::var("HOST_BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only == name;
    if run("attach") {
        attach();
    }
    if run("latency") {
        latency();
    }
    if run("memory") {
        memory();
    }
    if run("replay") {
        replay_in_process();
        replay_over_socket();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A `kiwi --wire` host of session `id`, its stdio client raw (lines as bytes, unparsed).
struct Host {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    socket: PathBuf,
}

impl Host {
    /// Starts the host on `env`'s session `id` (whose `wire.jsonl`, if any, is already written),
    /// answers its `initialize` and waits for its socket.
    fn start(env: &Env, config: &Path, id: &str) -> Self {
        let mut child = common::with_kiwi_bin(env.command(config, &["--session", id]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kiwi");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
        let mut host = Host { child, stdin, stdout, socket: env.session_dir(id).join("live.sock") };
        host.call("init", "initialize", json!({"protocol_version": "1.10"}));
        let ready = common::wait_until(Duration::from_secs(20), || UnixStream::connect(&host.socket).is_ok());
        assert!(ready, "the host serves no {}", host.socket.display());
        host
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn send(&mut self, message: serde_json::Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and reads up to its answer; every line read on the way, each with when it
    /// was read.
    fn call(&mut self, id: &str, method: &str, params: serde_json::Value) -> Vec<(Instant, String)> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = format!(r#""id":"{id}""#);
        let mut lines = Vec::new();
        loop {
            let line = read_line(&mut self.stdout).expect("the host's stdout ended");
            let at = Instant::now();
            let done = line.contains(&answer) && !line.contains(r#""method""#);
            lines.push((at, line));
            if done {
                return lines;
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_line(reader: &mut impl std::io::BufRead) -> Option<String> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}

/// Connects to `socket` and reads to `history_complete`: the history frames and the reader.
fn attach_to(socket: &Path) -> (usize, BufReader<UnixStream>) {
    let stream = UnixStream::connect(socket).expect("connect live.sock");
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut frames = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).expect("read live.sock");
        assert!(n > 0, "live.sock closed before history_complete after {frames} frames");
        // History frames are told apart by their start (a compare, cheap even in a debug build).
        if line.starts_with(br#"{"jsonrpc":"2.0","method":"event""#)
            || line.starts_with(br#"{"jsonrpc":"2.0","method":"request""#)
        {
            frames += 1;
            continue;
        }
        if line.windows(18).any(|w| w == b"\"history_complete\"") {
            return (frames, reader);
        }
        frames += 1;
    }
}

/// A host of a recorded session of `events` events.
fn recorded_host(events: usize, scripts: &[String]) -> (Env, Host) {
    let env = Env::new();
    let dir = env.session_dir("bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("wire.jsonl"), kit::recorded_wire(events)).unwrap();
    let config = env.named_scripted_config("config", scripts, json!({}));
    let host = Host::start(&env, &config, "bench");
    (env, host)
}

fn attach() {
    let events = 1_000;
    let (_env, host) = recorded_host(events, &[]);
    // The first attach warms the page cache and the host's allocator.
    drop(attach_to(&host.socket));
    let rounds = 50;
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            let (frames, reader) = attach_to(&host.socket);
            let took = started.elapsed();
            assert_eq!(frames, events);
            drop(reader);
            took
        })
        .collect();
    times.sort();
    println!(
        "attach: a {events}-event session over live.sock, connect -> history_complete: median {:.2} ms, best {:.2} ms, worst {:.2} ms ({rounds} attaches; target <= 20 ms)",
        ms(times[rounds / 2]),
        ms(times[0]),
        ms(times[rounds - 1])
    );
}

/// The `type` of an event frame's payload (`"params":{"type":"…"` in either client's framing).
fn event_type(line: &str) -> Option<&str> {
    if !line.contains(r#""method":"event""#) {
        return None;
    }
    let at = line.find(r#""params":{"type":""#)? + r#""params":{"type":""#.len();
    line[at..].split('"').next()
}

/// Events read by the attached client, each with when it was read, until `turn_ends` turns
/// ended.
fn read_events(mut reader: BufReader<UnixStream>, turn_ends: usize) -> Vec<(Instant, String)> {
    let mut seen = Vec::new();
    let mut ended = 0;
    while ended < turn_ends {
        let Some(line) = read_line(&mut reader) else { break };
        let at = Instant::now();
        if let Some(kind) = event_type(&line) {
            ended += usize::from(kind == "TurnEnd");
            seen.push((at, kind.to_string()));
        }
    }
    seen
}

fn latency() {
    let turns = 30;
    let burst = 2_000;
    let mut scripts: Vec<String> = (0..turns).map(|n| format!("text: reply {n}")).collect();
    scripts.push((0..burst).map(|n| format!("text: part {n}\n")).collect());
    let (_env, mut host) = recorded_host(10, &scripts);
    let (_, reader) = attach_to(&host.socket);
    let attached = std::thread::spawn(move || read_events(reader, turns + 1));
    let events = |lines: Vec<(Instant, String)>| -> Vec<(Instant, String)> {
        lines.into_iter().filter_map(|(at, line)| event_type(&line).map(|kind| (at, kind.to_string()))).collect()
    };
    let mut host_events = Vec::new();
    for n in 0..turns {
        host_events.extend(events(host.call(&format!("p{n}"), "prompt", json!({"user_input": "go"}))));
    }
    let singles = host_events.len();
    host_events.extend(events(host.call("burst", "prompt", json!({"user_input": "go"}))));
    let seen = attached.join().unwrap();
    assert_eq!(seen.len(), host_events.len(), "the attached client saw a different number of events");
    let deltas_us = |range: std::ops::Range<usize>| -> Vec<f64> {
        let mut d: Vec<f64> = range
            .map(|i| {
                assert_eq!(seen[i].1, host_events[i].1, "event {i} differs");
                let (a, h) = (seen[i].0, host_events[i].0);
                if a >= h { (a - h).as_secs_f64() * 1e6 } else { -((h - a).as_secs_f64() * 1e6) }
            })
            .collect();
        d.sort_by(f64::total_cmp);
        d
    };
    let line = |what: &str, d: Vec<f64>| {
        let p = |q: f64| d[((d.len() - 1) as f64 * q) as usize];
        println!(
            "latency, {what}: attached minus the host's own client: median {:.0} us, p90 {:.0} us, p99 {:.0} us, max {:.0} us ({} events; target <= 1 ms)",
            p(0.5),
            p(0.9),
            p(0.99),
            d[d.len() - 1],
            d.len()
        );
    };
    line(&format!("{turns} one-part turns"), deltas_us(0..singles));
    line(&format!("one turn of {burst} parts"), deltas_us(singles..host_events.len()));
}

/// Reads until a `TurnEnd` event; `None` when the connection closed first.
fn until_turn_end(mut reader: BufReader<UnixStream>) -> Option<BufReader<UnixStream>> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line.len() < 200 && line.windows(9).any(|w| w == b"\"TurnEnd\"") {
            return Some(reader);
        }
    }
}

fn memory() {
    let clients = 100;
    let parts = 1_000;
    let script: String = (0..parts).map(|n| format!("text: part {n} of the answer\n")).collect();
    let (_env, mut host) = recorded_host(1_000, &[script.clone(), script]);
    // The baseline holds what every connection and every turn shares: one client attached, a
    // turn run to it, the client gone.
    let (_, warm) = attach_to(&host.socket);
    let warm = std::thread::spawn(move || until_turn_end(warm));
    host.call("warm", "prompt", json!({"user_input": "go"}));
    drop(warm.join().unwrap().expect("the warm-up client lost the turn"));
    std::thread::sleep(Duration::from_millis(500));
    let before = kit::rss_kb(host.pid());
    let readers: Vec<BufReader<UnixStream>> = (0..clients).map(|_| attach_to(&host.socket).1).collect();
    std::thread::sleep(Duration::from_millis(500));
    let idle = kit::rss_kb(host.pid());
    // The same turn, read in full by every client.
    let counters: Vec<_> = readers.into_iter().map(|r| std::thread::spawn(move || until_turn_end(r))).collect();
    host.call("p", "prompt", json!({"user_input": "go"}));
    let readers: Vec<_> = counters.into_iter().map(|c| c.join().unwrap().expect("a client lost the turn")).collect();
    std::thread::sleep(Duration::from_millis(500));
    let after_turn = kit::rss_kb(host.pid());
    let per = |kb: u64| kb.saturating_sub(before) as f64 / clients as f64;
    println!(
        "memory: {clients} live.sock clients: host RSS {before} KB -> {idle} KB idle: {:.1} KB per client; after a {parts}-part turn to all: {after_turn} KB: {:.1} KB per client (target <= 50 KB)",
        per(idle),
        per(after_turn)
    );
    drop(readers);
}

/// The one history replay in this process: events/s of `history_frame` frames streamed from a
/// 100,000-event file, best of 5; and the current-schema path of the wire `replay`.
fn replay_in_process() {
    let events = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wire.jsonl");
    std::fs::write(&path, kit::recorded_wire(events)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let best = |label: &str, run: &dyn Fn() -> (usize, usize)| {
        let mut best = f64::MAX;
        let mut bytes = 0;
        for _ in 0..5 {
            let started = Instant::now();
            let (frames, out) = run();
            let took = started.elapsed().as_secs_f64();
            assert_eq!(frames, events, "{label}");
            bytes = out;
            best = best.min(took);
        }
        println!(
            "replay, {label}: {events} events from disk in {:.1} ms: {:.2} M events/s, {:.0} MB/s out (best of 5; target >= 1.5 M events/s)",
            best * 1000.0,
            events as f64 / best / 1e6,
            bytes as f64 / best / 1e6
        );
    };
    // `History::stream` starts its reading thread on the current runtime.
    best("as stored (live::history + history_frame)", &|| {
        runtime.block_on(async { count(kiwi::live::History::whole(path.clone()).stream(BATCH, history_frame)).await })
    });
    best("current schema (live::history + wire_read::parse + event_frame)", &|| {
        runtime.block_on(async {
            let batches = kiwi::live::History::whole(path.clone()).stream(BATCH, |line| {
                match kiwi::session::wire_read::parse(line)? {
                    kiwi::protocol::WireMessage::Event(event) => Some(kiwi::wire::frames::event_frame(&event)),
                    kiwi::protocol::WireMessage::Request(_) => None,
                }
            });
            count(batches).await
        })
    });
}

/// Frames and bytes (with line ends) of a streamed history.
async fn count<T: AsRef<[u8]>>(mut batches: kiwi::live::history::Batches<T>) -> (usize, usize) {
    let (mut frames, mut bytes) = (0, 0);
    while let Some(batch) = batches.next().await {
        for frame in batch.unwrap() {
            frames += 1;
            bytes += frame.as_ref().len() + 1;
        }
    }
    (frames, bytes)
}

/// A socket client attaching to a 100,000-event session: events/s up to `history_complete`,
/// read without parsing (a relay), best of 5.
fn replay_over_socket() {
    let events = 100_000;
    let (_env, host) = recorded_host(events, &[]);
    drop(attach_to(&host.socket));
    let mut best = f64::MAX;
    let mut buf = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (frames, mut reader) = attach_to(&host.socket);
        best = best.min(started.elapsed().as_secs_f64());
        assert_eq!(frames, events);
        buf.clear();
        let _ = reader.get_mut().set_nonblocking(true);
        let _ = reader.read_to_end(&mut buf);
    }
    println!(
        "replay over live.sock: {events} events, connect -> history_complete in {:.1} ms: {:.2} M events/s (best of 5)",
        best * 1000.0,
        events as f64 / best / 1e6
    );
}
