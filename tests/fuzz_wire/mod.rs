//! A wire fuzzer for the `kiwi` binary, shared by a short bounded run in `cargo test`
//! (`tests/wire_fuzz.rs`) and the full run (`cargo bench --bench fuzz_wire`).
//!
//! It spawns kiwi as a client would (an `_echo` model so prompts run real turns, a small
//! `--max-line-bytes`, every other process with `--yolo`), writes seeded random, odd, broken and
//! mutated frames to its stdin from this thread while a reader thread parses stdout, and answers
//! kiwi's own requests sometimes correctly, sometimes wrongly, sometimes late, sometimes never.
//! It checks strictly from the outside:
//! * no crash: kiwi lives until stdin EOF, then exits 0; no panic on stderr or in its log;
//! * exactly one answer per request: what each line must get is derived from its bytes
//!   (`oracle`); before EOF a final `cancel` ends any turn and the fuzzer waits until every
//!   answer owed has arrived, so a missing answer is never excused by the shutdown;
//! * only JSON on stdout: every line is a JSON-RPC 2.0 object, error objects are complete;
//! * bounded memory: VmRSS / VmHWM sampled from `/proc/<pid>/status`.
//!
//! Processes vary by index: every other one runs with `--yolo` (else approvals are asked), one
//! in four reads stdout with random pauses (kiwi's backpressure), and one in four gets its EOF
//! right after the last frame, mid-turn, without the final sync: then at most one answer (the
//! running prompt's) may be lost, everything else still holds.
//!
//! Environment: `KIWI_FUZZ_FRAMES` (lines to write), `KIWI_FUZZ_SEED` (decimal or 0x-hex),
//! `KIWI_FUZZ_FRAMES_PER_PROCESS` (lines per kiwi process), `KIWI_FUZZ_DIR` (where processes
//! run; a process with findings keeps its folder: `frames.bin` is exactly what was written to
//! stdin, `stdout.jsonl` what came back, `findings.txt` the details),
//! `KIWI_FUZZ_STALL_SECS` (silence that counts as a hang, default 30), `KIWI_FUZZ_BIN` (another
//! binary to fuzz instead, e.g. a fault-injecting wrapper that proves the checks bite).

mod generate;
mod oracle;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use generate::{Generator, Rng, derive_seed, json_str};
use oracle::{Ledger, clip, expect_chunk, id_key};

/// `--max-line-bytes`: small, so over-long lines are cheap to send and to skip.
pub const MAX_LINE: usize = 64 * 1024;

const DEFAULT_SEED: u64 = 0x6b69_7769_f022;

/// The id of the `cancel` that ends whatever turn is still running before the final sync.
const FINAL_CANCEL: &str = "fuzz-final-cancel";

const CONFIG: &str = r#"# The `_echo` provider: the user input is the model's reply, so turns are real and fast.
default_model = "echo"

[models.echo]
provider = "echo"
model = "echo"
max_context_size = 100000

[providers.echo]
type = "_echo"
base_url = ""
api_key = ""

[loop_control]
max_steps_per_turn = 4
max_retries_per_step = 2
"#;

pub struct Config {
    pub kiwi: PathBuf,
    pub frames: u64,
    pub seed: u64,
    pub frames_per_process: u64,
    pub dir: PathBuf,
    pub stall: Duration,
    /// A line on stderr after each process.
    pub progress: bool,
}

impl Config {
    /// The defaults given, overridden by `KIWI_FUZZ_*`.
    pub fn from_env(kiwi: &str, frames: u64, frames_per_process: u64, tmp: &str, progress: bool) -> Config {
        let seed = env_u64("KIWI_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
        let dir = std::env::var_os("KIWI_FUZZ_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(tmp).join(format!("fuzz_wire-{seed:#x}-{}", std::process::id())));
        Config {
            kiwi: std::env::var_os("KIWI_FUZZ_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(kiwi)),
            frames: env_u64("KIWI_FUZZ_FRAMES").unwrap_or(frames),
            seed,
            frames_per_process: env_u64("KIWI_FUZZ_FRAMES_PER_PROCESS").unwrap_or(frames_per_process).max(1),
            dir,
            stall: Duration::from_secs(env_u64("KIWI_FUZZ_STALL_SECS").unwrap_or(30)),
            progress,
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    let v = raw.trim().replace('_', "");
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    // A typo must not silently run the defaults.
    Some(parsed.unwrap_or_else(|_| panic!("{name}={raw:?} is not a number")))
}

/// The outcome of a run.
#[derive(Default)]
pub struct Report {
    pub seed: u64,
    /// Lines written to kiwi's stdin, answers to its requests included.
    pub frames: u64,
    /// Of which answers (right, wrong, duplicate) to kiwi's own requests.
    pub replies: u64,
    pub bytes: u64,
    pub processes: u64,
    pub duration: Duration,
    pub stdout_lines: u64,
    /// Responses carrying an id.
    pub answers: u64,
    /// Errors with `"id": null`.
    pub null_errors: u64,
    pub events: u64,
    pub server_requests: u64,
    /// Server requests the fuzzer chose never to answer.
    pub ignored_requests: u64,
    /// Answers lost to an abrupt stdin EOF (at most one per such process is accepted).
    pub dropped_at_eof: u64,
    /// Error codes of the answers, with counts.
    pub codes: BTreeMap<i64, u64>,
    /// `result.status` of the answers (prompt: finished / cancelled / max_steps_reached,
    /// interrupt: ok / idle), with counts: proof that real turns ran.
    pub statuses: BTreeMap<String, u64>,
    /// Event and request types seen on stdout, with counts.
    pub kinds: BTreeMap<String, u64>,
    /// The highest VmHWM (peak RSS) of any kiwi process, in KiB.
    pub peak_rss_kib: u64,
    pub findings: Vec<String>,
    /// Process folders kept because of findings.
    pub kept: Vec<PathBuf>,
}

impl Report {
    pub fn frames_per_sec(&self) -> f64 {
        self.frames as f64 / self.duration.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "fuzz_wire: seed {:#x}", self.seed)?;
        writeln!(
            f,
            "  frames written   {} ({} answers to kiwi's requests), {:.1} MiB, {} kiwi processes",
            self.frames,
            self.replies,
            self.bytes as f64 / (1024.0 * 1024.0),
            self.processes
        )?;
        writeln!(f, "  duration         {:.1} s, {:.0} frames/s", self.duration.as_secs_f64(), self.frames_per_sec())?;
        writeln!(
            f,
            "  stdout           {} lines: {} answers with an id, {} errors with id null, {} events, {} requests ({} left unanswered on purpose)",
            self.stdout_lines, self.answers, self.null_errors, self.events, self.server_requests, self.ignored_requests
        )?;
        writeln!(
            f,
            "  lost at EOF      {} answer(s) (a prompt running when stdin closed mid-turn)",
            self.dropped_at_eof
        )?;
        let codes: Vec<String> = self.codes.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(f, "  error codes      {}", codes.join(", "))?;
        let statuses: Vec<String> = self.statuses.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(f, "  result statuses  {}", statuses.join(", "))?;
        let kinds: Vec<String> = self.kinds.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(f, "  events/requests  {}", kinds.join(", "))?;
        writeln!(
            f,
            "  peak RSS         {:.1} MiB (VmHWM, highest of all processes)",
            self.peak_rss_kib as f64 / 1024.0
        )?;
        writeln!(f, "  findings         {}", self.findings.len())?;
        for finding in &self.findings {
            writeln!(f, "    - {finding}")?;
        }
        for dir in &self.kept {
            writeln!(f, "  kept for reproduction: {}", dir.display())?;
        }
        Ok(())
    }
}

/// Runs the whole fuzz campaign: as many kiwi processes as the frame budget needs.
pub fn run(cfg: &Config) -> Report {
    oracle::self_check();
    fs::create_dir_all(&cfg.dir).expect("create the fuzz dir");
    eprintln!(
        "fuzz_wire: seed {:#x}, {} frames, {} per process, in {}",
        cfg.seed,
        cfg.frames,
        cfg.frames_per_process,
        cfg.dir.display()
    );
    let start = Instant::now();
    let mut report = Report { seed: cfg.seed, ..Report::default() };
    let mut index = 0;
    while report.frames < cfg.frames {
        let budget = (cfg.frames - report.frames).min(cfg.frames_per_process);
        let p = run_process(cfg, index, budget);
        report.frames += p.frames;
        report.replies += p.replies;
        report.bytes += p.bytes;
        report.processes += 1;
        report.stdout_lines += p.out.lines;
        report.answers += p.out.answers;
        report.null_errors += p.out.nulls;
        report.events += p.out.events;
        report.server_requests += p.out.requests;
        report.ignored_requests += p.out.ignored;
        report.dropped_at_eof += p.dropped_at_eof;
        for (code, n) in &p.out.codes {
            *report.codes.entry(*code).or_default() += n;
        }
        for (status, n) in &p.out.statuses {
            *report.statuses.entry(status.clone()).or_default() += n;
        }
        for (kind, n) in &p.out.kinds {
            *report.kinds.entry(kind.clone()).or_default() += n;
        }
        report.peak_rss_kib = report.peak_rss_kib.max(p.peak_hwm_kib);
        if cfg.progress {
            eprintln!(
                "fuzz_wire: process {index}: {} frames, {:.1} s, peak RSS {:.1} MiB, {} finding(s); total {} frames, {:.0} frames/s",
                p.frames,
                p.duration.as_secs_f64(),
                p.peak_hwm_kib as f64 / 1024.0,
                p.findings.len(),
                report.frames,
                report.frames as f64 / start.elapsed().as_secs_f64()
            );
        }
        if !p.findings.is_empty() {
            report.findings.extend(p.findings.iter().map(|f| format!("process {index}: {f}")));
            report.kept.push(p.dir);
        }
        index += 1;
        // A process that could not take its frames died or hung: more processes would only
        // repeat that.
        if p.frames < budget {
            break;
        }
    }
    report.duration = start.elapsed();
    if report.kept.is_empty() {
        let _ = fs::remove_dir_all(&cfg.dir);
    }
    report
}

/// One kiwi process, `budget` lines.
struct Process {
    dir: PathBuf,
    frames: u64,
    replies: u64,
    bytes: u64,
    duration: Duration,
    out: ReaderStats,
    peak_hwm_kib: u64,
    dropped_at_eof: u64,
    findings: Vec<String>,
}

/// Liveness counters the monitor watches.
#[derive(Default)]
struct Progress {
    written: AtomicU64,
    read: AtomicU64,
    reader_done: AtomicBool,
    /// True while frames are being written: only then can kiwi block the fuzzer (a write into
    /// a full pipe), so only then does the monitor kill it for silence. The final sync and the
    /// wait for the exit time themselves.
    writing: AtomicBool,
    /// Set just before stdin is closed: until then "the wire closed" is never true.
    eof_sent: AtomicBool,
    stalled: AtomicBool,
    stop: AtomicBool,
}

/// An answer to one of kiwi's requests, to be written after `delay` more lines.
struct Reply {
    delay: u64,
    bytes: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn run_process(cfg: &Config, index: u64, budget: u64) -> Process {
    let started = Instant::now();
    let seed = derive_seed(cfg.seed, index);
    let dir = cfg.dir.join(format!("process-{index:03}"));
    let (work, home) = (dir.join("work"), dir.join("home"));
    fs::create_dir_all(&work).expect("create the work dir");
    fs::create_dir_all(&home).expect("create the home dir");
    let config_path = dir.join("config.toml");
    fs::write(&config_path, CONFIG).expect("write the config");
    let yolo = index % 2 == 1;
    let slow_reader = index % 4 == 2;
    let abrupt_eof = index % 4 == 3;
    let max_steps = if index.is_multiple_of(3) { "2" } else { "4" };
    let max_line = MAX_LINE.to_string();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--wire".as_ref(),
        "--config-file".as_ref(),
        config_path.as_os_str(),
        "--work-dir".as_ref(),
        work.as_os_str(),
        "--max-line-bytes".as_ref(),
        max_line.as_ref(),
        "--max-steps-per-turn".as_ref(),
        max_steps.as_ref(),
    ];
    if yolo {
        args.push("--yolo".as_ref());
    }
    let share = home.join(".kimi");
    let mut cmd = Command::new(&cfg.kiwi);
    cmd.args(&args).env("HOME", &home).env("KIMI_SHARE_DIR", &share);
    for var in ["KIMI_SCRIPTED_ECHO_TRACE", "KIMI_BASE_URL", "KIMI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"] {
        cmd.env_remove(var);
    }
    let shown: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let repro = format!(
        "HOME={} KIMI_SHARE_DIR={} {} {} < {}\n",
        home.display(),
        share.display(),
        cfg.kiwi.display(),
        shown.join(" "),
        dir.join("frames.bin").display()
    );
    fs::write(dir.join("command.txt"), &repro).expect("write command.txt");
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", cfg.kiwi.display()));
    let pid = child.id();

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let progress = Arc::new(Progress::default());
    // The monitor may kill kiwi only while this is true: it turns false before the child is
    // reaped, so a recycled pid is never signalled.
    let may_kill = Arc::new(Mutex::new(true));
    let (reply_tx, reply_rx) = channel::<Reply>();
    let reader = {
        let (stdout, ledger, progress) = (child.stdout.take().unwrap(), ledger.clone(), progress.clone());
        let log = dir.join("stdout.jsonl");
        std::thread::spawn(move || read_stdout(stdout, ledger, reply_tx, seed, slow_reader, &log, progress))
    };
    let stderr = {
        let mut stderr = child.stderr.take().unwrap();
        let path = dir.join("stderr.log");
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.read_to_end(&mut text);
            let _ = fs::write(path, &text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    progress.writing.store(true, Ordering::Relaxed);
    let monitor = spawn_monitor(pid, may_kill.clone(), progress.clone(), cfg.stall);

    let mut findings = Vec::new();
    let mut w = Writer::new(child.stdin.take().unwrap(), &dir, ledger.clone(), progress.clone(), seed);
    let mut generator = Generator::new(seed, MAX_LINE);
    let mut delayed: Vec<(u64, Vec<u8>)> = Vec::new();
    while w.lines < budget && w.error.is_none() {
        let chunk = generator.frame();
        w.send(&chunk, false);
        while let Ok(r) = reply_rx.try_recv() {
            delayed.push((w.lines + r.delay, r.bytes));
        }
        let due: Vec<Vec<u8>> = {
            let (now, rest): (Vec<_>, Vec<_>) = delayed.drain(..).partition(|(at, _)| *at <= w.lines);
            delayed = rest;
            now.into_iter().map(|(_, b)| b).collect()
        };
        for bytes in due {
            w.send(&bytes, true);
        }
    }

    // Final sync: end any turn, then wait for every answer owed before closing stdin (unless
    // this process tests the EOF that comes in the middle of everything).
    if !abrupt_eof {
        for (_, bytes) in std::mem::take(&mut delayed) {
            w.send(&bytes, true);
        }
        let cancel = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{FINAL_CANCEL}\",\"method\":\"cancel\"}}\n");
        w.send(cancel.as_bytes(), false);
    }
    w.flush();
    progress.writing.store(false, Ordering::Relaxed);
    if let Some(e) = &w.error
        && !progress.stalled.load(Ordering::Relaxed)
    {
        findings.push(format!("writing stdin failed after {} lines: {e} (did kiwi exit early?)", w.lines));
    }
    let (mut seen, mut since) = (progress.read.load(Ordering::Relaxed), Instant::now());
    loop {
        let owed = lock(&ledger).outstanding();
        if abrupt_eof
            || owed == 0
            || progress.stalled.load(Ordering::Relaxed)
            || progress.reader_done.load(Ordering::Relaxed)
        {
            break;
        }
        let now = progress.read.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() > cfg.stall {
            findings.push(format!("kiwi went silent for {:?} while it still owed {owed} answer(s)", cfg.stall));
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let (frames, replies, bytes) = (w.lines, w.replies, w.bytes);
    progress.eof_sent.store(true, Ordering::Relaxed);
    drop(w); // EOF on stdin

    *lock(&may_kill) = false;
    let deadline = Instant::now() + cfg.stall;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            findings.push(format!("kiwi did not exit within {:?} of stdin EOF; killed", cfg.stall));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = reader.join().expect("the stdout reader panicked");
    progress.stop.store(true, Ordering::Relaxed);
    let peak_hwm_kib = monitor.join().expect("the monitor panicked");
    let stderr = stderr.join().expect("the stderr reader panicked");

    let stalled = progress.stalled.load(Ordering::Relaxed);
    if stalled {
        findings.push(format!("kiwi made no progress for {:?} (no stdout line, no stdin accepted); killed", cfg.stall));
    }
    // A kill of ours is reported above, not as a crash.
    if let Some(status) = status
        && !status.success()
        && !stalled
    {
        use std::os::unix::process::ExitStatusExt;
        findings.push(match status.signal() {
            Some(sig) => format!("kiwi died of signal {sig}"),
            None => format!("kiwi exited with {status} after stdin EOF (expected 0)"),
        });
    }
    findings.extend(out.findings.iter().cloned());
    let (unsettled, dropped_at_eof) = lock(&ledger).reconcile(if abrupt_eof { 1 } else { 0 });
    findings.extend(unsettled);
    for line in stderr.lines().filter(|l| l.contains("panicked")).take(5) {
        findings.push(format!("stderr: {}", clip(line)));
    }
    findings.extend(log_panics(&share.join("logs")));
    if peak_hwm_kib > 1024 * 1024 {
        findings.push(format!("peak RSS {} MiB is absurd for this load", peak_hwm_kib / 1024));
    }

    if findings.is_empty() {
        let _ = fs::remove_dir_all(&dir);
    } else {
        let text = format!(
            "seed {:#x}, process {index} (its seed {seed:#x})\nreplay: {repro}\n{}\n",
            cfg.seed,
            findings.join("\n")
        );
        let _ = fs::write(dir.join("findings.txt"), text);
    }
    Process { dir, frames, replies, bytes, duration: started.elapsed(), out, peak_hwm_kib, dropped_at_eof, findings }
}

/// Panics that kiwi caught (a turn answered -32603) still leave a line in its log.
fn log_panics(logs: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(logs) else { return out };
    for entry in entries.flatten() {
        let Ok(file) = File::open(entry.path()) else { continue };
        for line in BufReader::new(file).lines().map_while(Result::ok) {
            if line.contains("panic") && out.len() < 5 {
                out.push(format!("log {}: {}", entry.file_name().to_string_lossy(), clip(&line)));
            }
        }
    }
    out
}

/// Samples memory every few ms and kills kiwi when nothing moves for `stall`.
/// Returns the peak in KiB: VmHWM (the kernel's own high-water mark), or the highest VmRSS
/// sampled should a kernel not report it.
fn spawn_monitor(pid: u32, may_kill: Arc<Mutex<bool>>, progress: Arc<Progress>, stall: Duration) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let (mut hwm, mut rss) = (0, 0);
        let mut last = (u64::MAX, u64::MAX);
        let mut since = Instant::now();
        while !progress.stop.load(Ordering::Relaxed) {
            if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
                hwm = hwm.max(status_kib(&status, "VmHWM:"));
                rss = rss.max(status_kib(&status, "VmRSS:"));
            }
            let now = (progress.written.load(Ordering::Relaxed), progress.read.load(Ordering::Relaxed));
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() > stall
                && progress.writing.load(Ordering::Relaxed)
                && !progress.stalled.load(Ordering::Relaxed)
            {
                let allowed = lock(&may_kill);
                if *allowed {
                    progress.stalled.store(true, Ordering::Relaxed);
                    // SAFETY: kill(2) on our own child, not reaped yet (see `may_kill`).
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        hwm.max(rss)
    })
}

fn status_kib(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The stdin side: registers what each line must get, logs it, writes it.
struct Writer {
    stdin: Option<BufWriter<ChildStdin>>,
    log: BufWriter<File>,
    ledger: Arc<Mutex<Ledger>>,
    progress: Arc<Progress>,
    rng: Rng,
    expects: Vec<oracle::Expect>,
    lines: u64,
    replies: u64,
    bytes: u64,
    error: Option<std::io::Error>,
}

impl Writer {
    fn new(stdin: ChildStdin, dir: &Path, ledger: Arc<Mutex<Ledger>>, progress: Arc<Progress>, seed: u64) -> Self {
        let log = File::create(dir.join("frames.bin")).expect("create frames.bin");
        Writer {
            stdin: Some(BufWriter::with_capacity(64 * 1024, stdin)),
            log: BufWriter::with_capacity(1 << 20, log),
            ledger,
            progress,
            rng: Rng::new(seed ^ 0x5772_6974_6572),
            expects: Vec::new(),
            lines: 0,
            replies: 0,
            bytes: 0,
            error: None,
        }
    }

    fn send(&mut self, chunk: &[u8], reply: bool) {
        if self.error.is_some() {
            return;
        }
        self.expects.clear();
        expect_chunk(chunk, MAX_LINE, &mut self.expects);
        {
            // Registered before the bytes leave, so an answer can never beat its expectation.
            let mut ledger = lock(&self.ledger);
            for (i, e) in self.expects.iter().enumerate() {
                ledger.expect(e, self.lines + 1 + i as u64);
            }
        }
        let n = self.expects.len() as u64;
        self.lines += n;
        if reply {
            self.replies += n;
        }
        self.bytes += chunk.len() as u64;
        let _ = self.log.write_all(chunk);
        let stdin = self.stdin.as_mut().expect("stdin open");
        // Split some lines across writes, so kiwi's framing sees partial lines.
        let result = if chunk.len() > 2 && self.rng.per_mille(30) {
            let cut = self.rng.range(1, chunk.len());
            stdin.write_all(&chunk[..cut]).and_then(|_| stdin.flush()).and_then(|_| stdin.write_all(&chunk[cut..]))
        } else {
            stdin.write_all(chunk)
        };
        // Flushing at random varies how many lines each of kiwi's reads gets.
        let result = result.and_then(|_| if self.rng.per_mille(150) { stdin.flush() } else { Ok(()) });
        if let Err(e) = result {
            self.error = Some(e);
        }
        self.progress.written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }

    fn flush(&mut self) {
        if let Some(stdin) = self.stdin.as_mut()
            && self.error.is_none()
            && let Err(e) = stdin.flush()
        {
            self.error = Some(e);
        }
        let _ = self.log.flush();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.flush();
        // Dropping the pipe is kiwi's EOF.
        if let Some(stdin) = self.stdin.take() {
            let _ = stdin.into_inner();
        }
    }
}

#[derive(Default)]
struct ReaderStats {
    lines: u64,
    answers: u64,
    nulls: u64,
    events: u64,
    requests: u64,
    ignored: u64,
    codes: BTreeMap<i64, u64>,
    statuses: BTreeMap<String, u64>,
    kinds: BTreeMap<String, u64>,
    findings: Vec<String>,
}

const WIRE_CLOSED: &str = "Wire connection closed before tool result was received.";

const KNOWN_CODES: [i64; 10] = [-32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003, -32004];

fn read_stdout(
    stdout: ChildStdout,
    ledger: Arc<Mutex<Ledger>>,
    replies: Sender<Reply>,
    seed: u64,
    slow: bool,
    log: &Path,
    progress: Arc<Progress>,
) -> ReaderStats {
    let mut s = ReaderStats::default();
    let mut input = BufReader::with_capacity(1 << 20, stdout);
    let mut log = BufWriter::with_capacity(1 << 20, File::create(log).expect("create stdout.jsonl"));
    let mut rng = Rng::new(seed ^ 0x5265_6164_6572);
    let mut answered: Vec<String> = Vec::new();
    let mut line = Vec::new();
    let finding = |s: &mut ReaderStats, text: String| {
        if s.findings.len() < 50 {
            s.findings.push(text);
        }
    };
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                finding(&mut s, format!("reading stdout failed: {e}"));
                break;
            }
        }
        s.lines += 1;
        progress.read.fetch_add(1, Ordering::Relaxed);
        if slow && rng.per_mille(1) {
            // A client busy elsewhere: kiwi's stdout pipe fills up and its writers must wait.
            std::thread::sleep(Duration::from_millis(rng.below(300)));
        }
        let _ = log.write_all(&line);
        let n = s.lines;
        let Some(body) = line.strip_suffix(b"\n") else {
            finding(
                &mut s,
                format!("stdout line {n} has no newline (torn at exit): {}", clip(&String::from_utf8_lossy(&line))),
            );
            continue;
        };
        let text = || clip(&String::from_utf8_lossy(body));
        let v: Value = match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                finding(&mut s, format!("stdout line {n} is not a JSON object: {}", text()));
                continue;
            }
        };
        if v.get("jsonrpc") != Some(&json!("2.0")) {
            finding(&mut s, format!("stdout line {n} lacks \"jsonrpc\":\"2.0\": {}", text()));
        }
        match v.get("method") {
            Some(Value::String(m)) if m == "event" => {
                s.events += 1;
                if let Some(kind) = v["params"]["type"].as_str() {
                    *s.kinds.entry(kind.to_string()).or_default() += 1;
                }
                // A tool call is never failed as "wire closed" while it is open
                // (two external calls sharing a model-chosen id made one of them fail so).
                if v["params"]["payload"]["return_value"]["message"].as_str() == Some(WIRE_CLOSED)
                    && !progress.eof_sent.load(Ordering::Relaxed)
                {
                    finding(
                        &mut s,
                        format!("stdout line {n}: a tool result says the wire closed, but it is open: {}", text()),
                    );
                }
                if !v["params"]["type"].is_string() || v.get("id").is_some() {
                    finding(&mut s, format!("stdout line {n}: malformed event: {}", text()));
                }
            }
            Some(Value::String(m)) if m == "request" => {
                s.requests += 1;
                if let Some(kind) = v["params"]["type"].as_str() {
                    *s.kinds.entry(kind.to_string()).or_default() += 1;
                }
                match answer_request(&v, &mut rng, &mut answered) {
                    Ok((out, ignored)) => {
                        if ignored {
                            s.ignored += 1;
                        }
                        for r in out {
                            let _ = replies.send(r);
                        }
                    }
                    Err(e) => finding(&mut s, format!("stdout line {n}: {e}: {}", text())),
                }
            }
            Some(_) => finding(&mut s, format!("stdout line {n}: unknown server method: {}", text())),
            None => {
                if let Some(status) = v["result"]["status"].as_str() {
                    *s.statuses.entry(status.to_string()).or_default() += 1;
                }
                if let Err(e) = check_response(&v, &mut s.codes) {
                    finding(&mut s, format!("stdout line {n}: {e}: {}", text()));
                }
                match v.get("id") {
                    Some(Value::Null) => {
                        s.nulls += 1;
                        lock(&ledger).null_answer();
                    }
                    Some(id) => {
                        s.answers += 1;
                        lock(&ledger).answer(id_key(id), n, &String::from_utf8_lossy(body));
                    }
                    None => finding(&mut s, format!("stdout line {n}: a response without an id: {}", text())),
                }
            }
        }
    }
    let _ = log.flush();
    progress.reader_done.store(true, Ordering::Relaxed);
    s
}

/// A response has exactly one of `result` / `error`; errors are complete, id-null ones are
/// -32700 / -32600, and a caught panic is a finding even though it was answered.
fn check_response(v: &Value, codes: &mut BTreeMap<i64, u64>) -> Result<(), String> {
    match (v.get("result"), v.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(e)) => {
            let code = e.get("code").and_then(Value::as_i64).ok_or("error without an integer code")?;
            *codes.entry(code).or_default() += 1;
            let message = e.get("message").and_then(Value::as_str).ok_or("error without a message")?;
            if e.get("data").is_none() {
                return Err("error without \"data\"".into());
            }
            if !KNOWN_CODES.contains(&code) {
                return Err(format!("undocumented error code {code}"));
            }
            if v.get("id") == Some(&Value::Null) && code != -32700 && code != -32600 {
                return Err(format!("error {code} with id null"));
            }
            if message.starts_with("Panic") {
                return Err("a turn panicked".into());
            }
            Ok(())
        }
        _ => Err("a response needs exactly one of result and error".into()),
    }
}

/// Decides how to answer one of kiwi's requests: right, wrong, twice, late or never.
/// Returns the reply lines and whether the request is left unanswered on purpose.
fn answer_request(v: &Value, rng: &mut Rng, answered: &mut Vec<String>) -> Result<(Vec<Reply>, bool), String> {
    let id = v.get("id").and_then(Value::as_str).ok_or("a request without a string id")?;
    let kind = v["params"]["type"].as_str().unwrap_or_default();
    if v["params"]["payload"]["id"].as_str() != Some(id) {
        return Err("a request whose payload id differs from its id".into());
    }
    let idj = json_str(id);
    let delay = match rng.below(10) {
        0..=5 => 0,
        6..=8 => rng.below(20),
        _ => rng.below(300),
    };
    let line =
        |body: String| Reply { delay, bytes: format!("{{\"jsonrpc\":\"2.0\",\"id\":{idj},{body}}}\n").into_bytes() };
    let result = |v: Value| line(format!("\"result\":{v}"));
    let approval = |response: &str| result(json!({"request_id": id, "response": response}));
    let tool_result = |output: Value, is_error: bool| {
        result(
            json!({"tool_call_id": id, "return_value": {"is_error": is_error, "output": output, "message": "m", "display": [{"type":"brief","text":"b"},{"type":"custom","x":[1]}]}}),
        )
    };
    let error = || line("\"error\":{\"code\":-1,\"message\":\"client says no\",\"data\":null}".into());
    let mut out = Vec::new();
    let mut ignored = false;
    match kind {
        "ApprovalRequest" => match rng.below(100) {
            0..=39 => out.push(approval("approve")),
            40..=54 => out.push(approval("reject")),
            // Rare: it approves "run command" for the rest of the process.
            55 => out.push(approval("approve_for_session")),
            56..=61 => out.push(error()),
            62..=66 => {
                let bads = [
                    json!({}),
                    Value::Null,
                    json!({"request_id": id, "response": "maybe"}),
                    json!({"response": "approve"}),
                    json!("approve"),
                    json!([]),
                    json!({"tool_call_id": id, "return_value": {"is_error": false, "output": "", "message": "", "display": []}}),
                ];
                out.push(result(rng.pick(&bads).clone()));
            }
            67..=69 => out.push(result(json!({"request_id": "someone-else", "response": "approve"}))),
            70..=74 => {
                out.push(approval("approve"));
                out.push(approval("reject"));
            }
            // A request (it has a method) that reuses the pending id: answered -32601.
            75..=77 => {
                out.push(line("\"method\":\"bogus\"".into()));
                out.push(approval("approve"));
            }
            78..=79 => {
                if let Some(old) = answered.last() {
                    let bytes = format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"request_id\":{0},\"response\":\"approve\"}}}}\n",
                        json_str(old)
                    );
                    out.push(Reply { delay, bytes: bytes.into_bytes() });
                }
                ignored = true;
            }
            _ => ignored = true,
        },
        "ToolCallRequest" => match rng.below(100) {
            0..=44 => out.push(tool_result(json!("external output"), false)),
            45..=49 => out.push(tool_result(json!([{"type":"text","text":"a"},{"type":"think","think":"b"}]), false)),
            50..=54 => out.push(tool_result(json!("x".repeat(20_000)), true)),
            55..=61 => out.push(error()),
            62..=69 => {
                let bads = [
                    json!({}),
                    Value::Null,
                    json!({"tool_call_id": id}),
                    json!({"request_id": id, "response": "approve"}),
                    json!({"tool_call_id": id, "return_value": {"is_error": false, "output": [{"type":"bogus"}], "message": "", "display": []}}),
                ];
                out.push(result(rng.pick(&bads).clone()));
            }
            70..=74 => {
                out.push(tool_result(json!("first"), false));
                out.push(tool_result(json!("second"), false));
            }
            75..=77 => {
                out.push(line("\"method\":\"prompt\",\"params\":{\"user_input\":\"text: hi\"}".into()));
                out.push(error());
            }
            _ => ignored = true,
        },
        other => return Err(format!("unknown request type {other:?}")),
    }
    if answered.len() >= 16 {
        answered.remove(0);
    }
    answered.push(id.to_string());
    Ok((out, ignored))
}
