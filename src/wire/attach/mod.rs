//! Attaching a wire client to a session another kiwi process holds (`docs/host.md`): instead
//! of failing on the session lock, `kiwi --wire -S/-r/-C` connects to the holder's
//! `live.sock` and relays ([`relay`]): the client's messages go to the host, where the one wire
//! handler serves them as this connection's (`wire::host`); its `initialize` is answered here,
//! from this process's own config ([`initialize`]). When the host goes away while the client is
//! still there, this process takes the session over or attaches to the process that did
//! ([`handoff`]), and the client goes on without a protocol error.
//!
//! Invariants: this process writes nothing to the session folder while it relays (one writer:
//! the host); the client's ids stay its own (the host keeps each connection's ids apart).

pub mod handoff;
pub mod initialize;
pub mod relay;

use std::io::{BufRead as _, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use self::handoff::{Next, Shared, held_by_another, next_host};
use self::relay::{Ended, Relay};
use super::serve::{Client, WireOptions, serve_client};
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::rpc::reader::spawn_reader;
use crate::rpc::writer::spawn_writer;
use crate::session::store::{Metadata, SessionChoice, lock_folder, sessions_dir};

/// How long the client's output may go unread before what is queued for it is abandoned.
const DRAIN_PATIENCE: Duration = Duration::from_secs(1);

/// How long an opener whose host cannot be reached waits for the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The id and folder of the stored session `choice` names when another process holds its
/// lock; `None` for a new session, an unknown one, or one nobody holds. Reads only.
pub fn held_elsewhere(share: &Path, work_dir: &Path, choice: &SessionChoice) -> Option<(String, PathBuf)> {
    let id = match choice {
        SessionChoice::Id(id) => id.clone(),
        SessionChoice::Continue => Metadata::load(share).entry(&work_dir.to_string_lossy())?.last_session_id.clone()?,
        SessionChoice::New | SessionChoice::Hosted(_) => return None,
    };
    crate::session::id::check_session_id(&id).ok()?;
    let dir = sessions_dir(share, work_dir).join(&id);
    if !dir.join("context.jsonl").is_file() {
        return None;
    }
    // Taken and dropped at once: only whether someone else holds it matters here.
    matches!(lock_folder(&dir), Ok(None)).then_some((id, dir))
}

/// How long the host may take to send its first frame (a host that refuses the peer closes
/// the connection without one).
const FIRST_FRAME: Duration = Duration::from_secs(2);

/// Connects to the host of the session in `dir` and waits for its first frame: a peer the host
/// refuses is closed without a byte, and counts as a host that cannot be reached.
pub fn connect(dir: &Path) -> std::io::Result<BufReader<UnixStream>> {
    let stream = UnixStream::connect(super::host::Address::of(dir)?.path())?;
    stream.set_read_timeout(Some(FIRST_FRAME))?;
    let mut reader = BufReader::new(stream);
    if reader.fill_buf()?.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "the host closed the connection"));
    }
    reader.get_ref().set_read_timeout(None)?;
    Ok(reader)
}

/// Waits up to [`LOCK_WAIT`] for the session's lock to be free (its host gone); whether it is.
pub fn wait_for_lock(dir: &Path) -> bool {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        if !matches!(lock_folder(dir), Ok(None)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Where the attached session is, as this process sees it.
pub struct Target {
    pub id: String,
    /// The session folder.
    pub dir: PathBuf,
    pub work_dir: PathBuf,
}

/// Serves a wire client on a session another process hosts (`host`, already connected) until
/// the client leaves. When the host goes away, this process takes the session over (then it
/// serves the client itself, with its own config, as `kiwi --wire -S` would) or attaches to
/// the process that did. `Err`: the session could be neither reached nor taken over.
pub fn serve<R, W>(
    setup: &AgentSetup,
    target: Target,
    host: BufReader<UnixStream>,
    options: WireOptions,
    input: R,
    output: W,
) -> Result<ExitCode, BuildError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BuildError::Fatal(format!("Cannot start the async runtime: {e}")))?;
    let out = Shared::new(output);
    let mut lines = spawn_reader(input, options.max_line_bytes);
    let mut relay = Relay::new(setup, &target, options.version.clone());
    let mut host = host;
    // SIGTERM / SIGINT end the relay as EOF does (exit 0, the host goes on).
    let signalled = CancellationToken::new();
    runtime.spawn(cancel_on_signal(signalled.clone()));
    loop {
        let (client, writer) = spawn_writer(out.clone());
        let ended = runtime.block_on(async {
            let stop = CancellationToken::new();
            let watch = {
                let (stop, signalled, closed) = (stop.clone(), signalled.clone(), writer.closed.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = signalled.cancelled() => {}
                        () = closed.cancelled() => {}
                    }
                    stop.cancel();
                })
            };
            let ended = relay.run(host, &mut lines, &client, &stop).await;
            watch.abort();
            if ended == Ended::HostGone {
                relay.host_gone(&client).await;
            }
            drop(client);
            writer.join_while_read(DRAIN_PATIENCE).await;
            ended
        });
        if ended == Ended::ClientGone {
            return Ok(ExitCode::SUCCESS);
        }
        tracing::info!("the host of session {} went away", target.id);
        host = loop {
            match next_host(&target.dir) {
                Next::Attach(stream) => break stream,
                Next::GaveUp => {
                    return Err(BuildError::Fatal(format!(
                        "Cannot take over session {}: its host went away, and its lock stayed held by a process \
                         that does not serve it",
                        target.id
                    )));
                }
                Next::Host => {
                    tracing::info!("taking session {} over", target.id);
                    let client = Mutex::new(Some(Client {
                        lines,
                        initialize: relay.initialize_to_apply(),
                        unanswered: relay.unanswered(),
                    }));
                    let request = SessionRequest {
                        work_dir: target.work_dir.clone(),
                        session: SessionChoice::Id(target.id.clone()),
                        trace: None,
                    };
                    let served = serve_client(setup, request, options.clone(), &client, out.clone());
                    let back = client.into_inner().unwrap_or_else(|p| p.into_inner());
                    match (served, back) {
                        // Another process opened the session first: attach to it.
                        (Err(_), Some(back)) if held_by_another(&target.dir) => lines = back.lines,
                        (served, _) => return served,
                    }
                }
            }
        };
    }
}

/// Cancels `token` on SIGTERM or SIGINT (the process then exits 0, as a wire server does).
async fn cancel_on_signal(token: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("signal received; leaving the session's host");
    token.cancel();
}
