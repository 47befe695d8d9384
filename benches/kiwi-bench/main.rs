//! kiwi-bench: performance of the release `kiwi` binary, measured from a client's side over
//! pipes (the way an IDE sees it), with the model either `_scripted_echo` or a mock Kimi server
//! inside this process.
//!
//! Run: `cargo bench --bench kiwi-bench` (or `… -- startup resume` for some sections; the bench profile builds `kiwi` with the release
//! settings, fat LTO included, which is most of the wait; the measurements themselves take
//! seconds). Every number is a median over ≥5 runs, each run a fresh
//! `kiwi` process; nothing here asserts on timings, it only prints.
//!
//! The temp dirs, configs, command line and the mock HTTP server are the tests' own
//! (`tests/common`), so a bench and a test start kiwi the same way; only the client that reads
//! kiwi's output is the bench's (`client.rs`: it must cost the server as little as possible).
//!
//! What the lines mean ("server" = the `kiwi` child; its CPU is read from
//! `/proc/<pid>/task/*/schedstat`, ns resolution, falling back to the 10 ms ticks of
//! `/proc/<pid>/stat` utime+stime; peak RSS is `VmHWM` from `/proc/<pid>/status`):
//! * `startup`: spawn → `initialize` answered (ms), and peak RSS of an idle server (MB), next
//!   to the same two numbers for the least a server can do: this bench binary re-run as a
//!   process that reads one line and answers it (`ONE_LINE`). Goal: ≤2× its time, ≤6 MB.
//! * `scripted 20k`: one turn of 20,000 `_scripted_echo` text parts: wire lines relayed to the
//!   client per second (prompt sent → prompt answered), server CPU µs per event, peak RSS.
//! * `scripted 200 steps`: one turn of 200 `SetTodoList` calls + a text answer, wall ms/step.
//! * `kimi stream`: `type = "kimi"` against the mock, which streams 20,000 one-token
//!   chunks then `[DONE]` (chunked HTTP/1.1 in 16 KiB chunks, one write, `text/event-stream`):
//!   events/s relayed to the
//!   client, server CPU µs per chunk (schedstat, and the tick-based value), peak RSS.
//!   Targets: ≥150,000 events/s, ≤3 µs/chunk, ≤12 MB.
//! * `kimi 200 steps`: 200 mock replies that each stream one `SetTodoList` call (name delta,
//!   four argument deltas, `finish_reason: tool_calls`), then a text reply. "overhead" is the
//!   server's time per step: mock finished writing reply k → mock has request k+1 in full
//!   (parse the stream, run the tool, store the step, build and send the whole history again),
//!   as medians over steps 1-20 and 181-200, so a growing history shows as a difference. The
//!   cost of re-sending the history is the least-squares slope of that overhead over the request
//!   body size (µs per KB), the rest is the intercept (the overhead at an empty body). The
//!   body build cannot be timed from the `ToolResult` event: kiwi's soul and its event relay
//!   share one thread, so the event reaches stdout only once the soul awaits the HTTP reply.
//!   Target ≤1 ms/step, flat.
//! * `session 50 turns`: 50 prompts in one session; per-turn latency (prompt sent →
//!   answered) median over turns 1-10 and 41-50, and the least-squares slope over all 50
//!   (ms per turn). `echo` does not re-send history, so its slope is kiwi's own per-turn growth
//!   (target ≤0.01 ms/turn); `kimi` does, so its slope includes encoding and sending the
//!   growing history.
//! * `resume`: spawn → `initialize` answered for `--session <id>` over a 10,000-line
//!   `context.jsonl` versus a fresh session, and the difference (target ≤50 ms). A final run
//!   checks that the resumed history really reaches the model.
#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/mock_llm.rs"]
mod mock_llm;

mod client;
mod history;
mod streams;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use client::{Server, fit, median, slope};
use common::Env;
use mock_llm::{MockLlm, MockResponse, RecordedRequest, Split, background_runtime};
use serde_json::json;
use streams::{text_stream, todo_call_stream};

const RUNS: usize = 5;
/// How long to wait for the mock to finish writing the replies a run asked for: it stamps a
/// request only once its reply is written, which can be a moment after kiwi answered the client.
const REPLIES_WRITTEN: Duration = Duration::from_secs(5);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn echo_config(env: &Env, name: &str, scripts: &[String]) -> PathBuf {
    let extra = json!({
        "models": {"scripted": {"max_context_size": 100_000_000}},
        "loop_control": {"max_steps_per_turn": 100_000, "reserved_context_size": 1000}
    });
    env.named_scripted_config(name, scripts, extra)
}

/// A real Kimi provider pointed at the mock. One attempt per step: a failure must show, not be
/// retried into the timings.
fn kimi_config(env: &Env, base_url: &str) -> PathBuf {
    let extra = json!({
        "models": {"m": {"max_context_size": 100_000_000}},
        "loop_control": {"max_steps_per_turn": 100_000, "max_retries_per_step": 1, "reserved_context_size": 1000}
    });
    env.provider_config("kimi", "kimi-k2", base_url, extra)
}

/// One `200 text/event-stream` reply carrying `sse` (already `data: …\n\n` framed), in 16 KiB
/// chunks: the size a real server's socket writes tend to come in.
fn sse_reply(sse: &str) -> MockResponse {
    MockResponse::sse(sse).split(Split::Every(16 * 1024))
}

/// The requests a run made, once the mock has written all `n` replies.
fn served(mock: &MockLlm, n: usize) -> Vec<RecordedRequest> {
    let hits = mock.take_answered(n, REPLIES_WRITTEN);
    assert_eq!(hits.len(), n, "requests served");
    hits
}

/// Time from the mock's reply `k` written to request `k + 1` in full.
fn gap(reply: &RecordedRequest, next: &RecordedRequest) -> Duration {
    next.received.saturating_duration_since(reply.answered.expect("reply written"))
}

/// Fields drop in order: the mock before the runtime that serves it, the temp dir last.
struct Bench {
    mock: MockLlm,
    _rt: tokio::runtime::Runtime,
    /// The Kimi config, against the mock.
    kimi: PathBuf,
    env: Env,
}

impl Bench {
    fn spawn(&self, config: &Path) -> Server {
        let mut k = Server::spawn(self.env.command(config, &[]));
        k.initialize();
        k
    }
}

/// Set in the environment of the bench binary re-run as the baseline process of `startup`.
const ONE_LINE: &str = "KIWI_BENCH_ONE_LINE";

/// The baseline: read one line, answer it as `initialize` is answered, wait for EOF.
fn one_line_server() {
    use std::io::{BufRead, Read, Write};
    let mut line = String::new();
    let mut stdin = std::io::stdin().lock();
    if stdin.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"result\":{}}\n");
    let _ = out.flush();
    let _ = stdin.read_to_end(&mut Vec::new());
}

fn main() {
    if std::env::var_os(ONE_LINE).is_some() {
        return one_line_server();
    }
    println!("kiwi-bench: {} (medians of {RUNS}+ runs)", env!("CARGO_BIN_EXE_kiwi"));
    let rt = background_runtime();
    let mock = rt.block_on(MockLlm::start());
    let env = Env::new();
    let kimi = kimi_config(&env, &format!("{}/v1", mock.base_url()));
    let b = Bench { mock, _rt: rt, kimi, env };

    // `cargo bench --bench kiwi-bench -- startup kimi_steps` runs only the sections named.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    type Section = (&'static str, fn(&Bench));
    let sections: [Section; 7] = [
        ("startup", startup),
        ("scripted_turn", scripted_turn),
        ("scripted_steps", scripted_steps),
        ("kimi_stream", kimi_stream),
        ("kimi_steps", kimi_steps),
        ("session_turns", session_turns),
        ("resume", resume),
    ];
    for (name, section) in sections {
        if only.is_empty() || only.iter().any(|o| o == name) {
            section(&b);
        }
    }
}

/// What one prompt cost the server, seen from the client.
struct Turn {
    /// Lines before the prompt's answer.
    events: usize,
    /// Prompt sent → answered.
    secs: f64,
    /// Server CPU seconds meanwhile (schedstat, and the 10 ms stat ticks).
    cpu: f64,
    cpu_ticks: f64,
    /// Peak RSS of the server so far, MB.
    rss: f64,
}

/// Sends one prompt to `k` and reads until its answer.
fn measured_turn(k: &mut Server) -> Turn {
    let (cpu0, ticks0) = (k.cpu(), k.cpu_ticks());
    let t = Instant::now();
    k.prompt("p", "go");
    let events = k.until("p");
    let secs = t.elapsed().as_secs_f64();
    Turn { events, secs, cpu: k.cpu() - cpu0, cpu_ticks: k.cpu_ticks() - ticks0, rss: k.peak_rss_mb() }
}

fn startup(b: &Bench) {
    let config = echo_config(&b.env, "idle", &[]);
    let baseline = || {
        let mut cmd = std::process::Command::new(std::env::current_exe().expect("bench binary"));
        cmd.env(ONE_LINE, "1");
        cmd
    };
    // Interleaved, so that a busy moment of the machine falls on both alike.
    let (mut kiwi, mut kiwi_rss, mut base, mut base_rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..21 {
        for (cmd, times, rss) in
            [(b.env.command(&config, &[]), &mut kiwi, &mut kiwi_rss), (baseline(), &mut base, &mut base_rss)]
        {
            let t = Instant::now();
            let mut k = Server::spawn(cmd);
            k.initialize();
            times.push(ms(t.elapsed()));
            if i % 4 == 0 {
                std::thread::sleep(Duration::from_millis(200));
                rss.push(k.peak_rss_mb());
            }
        }
    }
    let (kiwi, base) = (median(kiwi), median(base));
    println!(
        "startup: spawn -> initialize answered {kiwi:.2} ms ({:.2}x a one-line server's {base:.2} ms); idle peak RSS {:.2} MB (one-line server {:.2} MB)",
        kiwi / base,
        median(kiwi_rss),
        median(base_rss)
    );
}

fn scripted_turn(b: &Bench) {
    let parts = 20_000;
    let mut script = String::with_capacity(parts * 12);
    for i in 0..parts {
        script.push_str(&format!("text: t{i}\n"));
    }
    let config = echo_config(&b.env, "turn", std::slice::from_ref(&script));
    let (mut rates, mut cpu, mut rss) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let turn = measured_turn(&mut b.spawn(&config));
        rates.push(turn.events as f64 / turn.secs);
        cpu.push(turn.cpu / turn.events as f64 * 1e6);
        rss.push(turn.rss);
    }
    println!(
        "scripted 20k: {:.0} events/s, {:.2} µs server CPU per event, peak RSS {:.2} MB",
        median(rates),
        median(cpu),
        median(rss)
    );
}

fn scripted_steps(b: &Bench) {
    let steps = 200;
    let mut scripts: Vec<String> = (0..steps)
        .map(|i| format!("tool_call: {{\"id\": \"tc-{i}\", \"name\": \"SetTodoList\", \"arguments\": \"{{\\\"todos\\\": [{{\\\"title\\\": \\\"step {i}\\\", \\\"status\\\": \\\"in_progress\\\"}}]}}\"}}"))
        .collect();
    scripts.push("text: done".into());
    let config = echo_config(&b.env, "steps", &scripts);
    let mut per_step = Vec::new();
    for _ in 0..RUNS {
        let mut k = b.spawn(&config);
        let t = Instant::now();
        k.prompt("p", "go");
        k.until("p");
        per_step.push(ms(t.elapsed()) / (steps + 1) as f64);
    }
    println!("scripted {steps} steps: {:.3} ms per step (wall)", median(per_step));
}

fn kimi_stream(b: &Bench) {
    let chunks = 20_000;
    let sse = text_stream(chunks, "t");
    let (mut rates, mut cpu, mut cpu_ticks, mut rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        b.mock.reset();
        b.mock.push(sse_reply(&sse));
        let turn = measured_turn(&mut b.spawn(&b.kimi));
        assert!(turn.events >= chunks, "only {} events for {chunks} chunks", turn.events);
        rates.push(turn.events as f64 / turn.secs);
        cpu.push(turn.cpu / chunks as f64 * 1e6);
        cpu_ticks.push(turn.cpu_ticks / chunks as f64 * 1e6);
        rss.push(turn.rss);
    }
    println!(
        "kimi stream 20k chunks: {:.0} events/s, {:.2} µs server CPU per chunk ({:.2} by stat ticks), peak RSS {:.2} MB",
        median(rates),
        median(cpu),
        median(cpu_ticks),
        median(rss)
    );
}

fn kimi_steps(b: &Bench) {
    let steps = 200;
    let (mut first, mut last, mut per_kb, mut base) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut wall, mut body_first, mut body_last) = (Vec::new(), 0, 0);
    for _ in 0..RUNS {
        b.mock.reset();
        for i in 0..steps {
            b.mock.push(sse_reply(&todo_call_stream(i, 2000 + 60 * i as u64)));
        }
        b.mock.push(sse_reply(&text_stream(1, "done")));
        let mut k = b.spawn(&b.kimi);
        let t = Instant::now();
        k.prompt("p", "go");
        k.until("p");
        wall.push(ms(t.elapsed()) / (steps + 1) as f64);
        let hits = served(&b.mock, steps + 1);
        let overhead: Vec<f64> = (0..steps).map(|s| ms(gap(&hits[s], &hits[s + 1]))).collect();
        let kb: Vec<f64> = (0..steps).map(|s| hits[s + 1].body.len() as f64 / 1024.0).collect();
        first.push(median(overhead[..20].to_vec()));
        last.push(median(overhead[steps - 20..].to_vec()));
        let (slope, intercept) = fit(&kb, &overhead);
        per_kb.push(slope * 1000.0);
        base.push(intercept);
        body_first = hits[1].body.len();
        body_last = hits[steps].body.len();
    }
    println!(
        "kimi {steps} steps: overhead {:.3} ms/step (steps 1-20), {:.3} ms/step (181-200) = \
         {:.3} ms + {:.2} µs per KB of request body; wall {:.3} ms/step; request body {:.1} -> {:.1} KB",
        median(first),
        median(last),
        median(base),
        median(per_kb),
        median(wall),
        body_first as f64 / 1024.0,
        body_last as f64 / 1024.0
    );
}

/// Per-turn latencies of `turns` prompts in one fresh session.
fn turns(b: &Bench, config: &Path, turns: usize) -> Vec<f64> {
    let mut k = b.spawn(config);
    (0..turns)
        .map(|i| {
            let id = format!("p{i}");
            let t = Instant::now();
            k.prompt(&id, &format!("question {i}"));
            k.until(&id);
            ms(t.elapsed())
        })
        .collect()
}

fn print_turns(label: &str, runs: &[Vec<f64>], extra: &str) {
    let n = runs[0].len();
    println!(
        "session {n} turns ({label}): {:.3} ms/turn (turns 1-10), {:.3} ms/turn ({}-{n}), slope {:+.4} ms/turn{extra}",
        median(runs.iter().map(|r| median(r[..10].to_vec())).collect()),
        median(runs.iter().map(|r| median(r[n - 10..].to_vec())).collect()),
        n - 9,
        median(runs.iter().map(|r| slope(r)).collect()),
    );
}

fn session_turns(b: &Bench) {
    let n = 50;
    let scripts: Vec<String> = (0..n).map(|i| format!("text: answer {i}")).collect();
    let config = echo_config(&b.env, "session", &scripts);
    let runs: Vec<Vec<f64>> = (0..RUNS).map(|_| turns(b, &config, n)).collect();
    print_turns("echo", &runs, "");

    let mut runs = Vec::new();
    let mut bodies = (0, 0);
    for _ in 0..RUNS {
        b.mock.reset();
        for _ in 0..n {
            b.mock.push(sse_reply(&text_stream(4, "ok ")));
        }
        runs.push(turns(b, &b.kimi, n));
        let hits = served(&b.mock, n);
        bodies = (hits[0].body.len(), hits[n - 1].body.len());
    }
    let extra = format!("; request body {:.1} -> {:.1} KB", bodies.0 as f64 / 1024.0, bodies.1 as f64 / 1024.0);
    print_turns("kimi", &runs, &extra);
}

fn resume(b: &Bench) {
    let lines = 10_000;
    let id = "bench-resume";
    // Its own work dir and share dir: the session on disk is the only one there.
    let env = Env::new();
    let (mut fresh, mut resumed) = (Vec::new(), Vec::new());
    let mut written = (0, 0);
    // Interleaved so that machine load drifts hit both sides alike; the file is rewritten each
    // time because a run may append to it.
    for _ in 0..2 * RUNS + 1 {
        written = history::write_session(&env, id, lines);
        let t = Instant::now();
        let mut k = Server::spawn(env.command(&b.kimi, &["--session", id]));
        k.initialize();
        resumed.push(ms(t.elapsed()));
        drop(k);
        let t = Instant::now();
        let mut k = Server::spawn(env.command(&b.kimi, &[]));
        k.initialize();
        fresh.push(ms(t.elapsed()));
    }
    // The resume must have restored the history: the next request carries all of it.
    history::write_session(&env, id, lines);
    b.mock.reset();
    b.mock.push(sse_reply(&text_stream(1, "ok")));
    let mut k = Server::spawn(env.command(&b.kimi, &["--session", id]));
    k.initialize();
    k.prompt("p", "go on");
    k.until("p");
    let hits = served(&b.mock, 1);
    let body: serde_json::Value = serde_json::from_slice(&hits[0].body).expect("request json");
    let sent = body["messages"].as_array().map_or(0, Vec::len);
    // + the system prompt and the new user message.
    assert_eq!(sent, written.1 + 2, "messages sent after resume");
    let (fresh, resumed) = (median(fresh), median(resumed));
    println!(
        "resume {lines} lines ({:.2} MB, {} messages): fresh {fresh:.2} ms, resumed {resumed:.2} ms, \
         difference {:.2} ms",
        written.0 as f64 / (1024.0 * 1024.0),
        written.1,
        resumed - fresh
    );
}
