//! The accept loop of `kiwi web` (`docs/web.md` §2.1): each TCP connection served by hyper's
//! HTTP/1.1 connection (with upgrades, for the session WebSocket) under limits that keep a
//! client that never finishes its request from holding the server: a time limit on reading a
//! request head, which also closes a keep-alive connection idle between requests (hyper starts
//! it as soon as the connection waits for a head), and a cap on open connections (one over the
//! cap is closed at once, so descriptors are never exhausted and the server keeps answering once
//! the flood's connections time out).
//!
//! Invariants: every request carries its peer's address (`ConnectInfo`, for the LAN rule); every
//! connection has TCP_NODELAY (frames are small and written as they come: without it a frame
//! written while the previous one is unacknowledged waits for the client's delayed ACK, ~40 ms);
//! at `stop` the listener closes and every connection is asked to finish gracefully.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

/// The limits of the connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a request head may take to arrive, and so how long a keep-alive connection may
    /// idle between requests.
    pub header_read: Duration,
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
}

/// A connection's place under the cap, shared by its requests: a request that upgrades to a
/// WebSocket keeps it (hyper lets go of the connection at the upgrade), so open sockets count
/// against the cap as long as they live.
#[derive(Clone)]
pub struct Slot {
    _permit: Arc<tokio::sync::OwnedSemaphorePermit>,
}

/// A request head must be complete within this time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections served at once (fewer when the descriptor limit is low).
pub const MAX_CONNECTIONS: usize = 1024;

impl Limits {
    /// The default limits for a process allowed `fd_limit` descriptors: at most a quarter of them
    /// go to connections, the rest stay for session files, tools and their pipes.
    pub fn for_fd_limit(fd_limit: u64) -> Self {
        let share = usize::try_from(fd_limit / 4).unwrap_or(usize::MAX);
        Self { header_read: HEADER_READ_TIMEOUT, max_connections: share.clamp(16, MAX_CONNECTIONS) }
    }
}

/// The process's soft descriptor limit (`RLIMIT_NOFILE`).
pub fn fd_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// Raises the soft descriptor limit to the hard one (`kiwi web` only: many sockets are its job).
/// Process-global; called once by the binary's `main` before anything else runs.
pub fn raise_fd_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write only the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Serves `app` on `listener` until `stop`, then waits for the open connections to finish.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
    loop {
        let (tcp, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors (or another passing error): wait a little instead of
                    // spinning on a listener that stays readable.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!("{} connections open: closing a new one", limits.max_connections);
            drop(tcp);
            continue;
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let app = app.clone();
        let slot = Slot { _permit: Arc::new(permit) };
        let held = slot.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(slot.clone());
            let mut app = app.clone();
            async move { app.call(request.map(axum::body::Body::new)).await }
        });
        let connection = builder.serve_connection(TokioIo::new(tcp), service).with_upgrades();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = held;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection from {peer}: {e}");
                    }
                    return;
                }
                () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            if let Err(e) = connection.await {
                tracing::debug!("connection closing: {e}");
            }
        });
    }
    drop(listener);
    // Every connection gives its slot back when it ends.
    let _all = slots.acquire_many(limits.max_connections as u32).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_descriptors_for_the_rest() {
        assert_eq!(Limits::for_fd_limit(1024).max_connections, 256);
        assert_eq!(Limits::for_fd_limit(1 << 20).max_connections, MAX_CONNECTIONS);
        assert_eq!(Limits::for_fd_limit(20).max_connections, 16);
        assert_eq!(Limits::for_fd_limit(u64::MAX).max_connections, MAX_CONNECTIONS);
        raise_fd_limit();
        assert!(fd_limit() >= 20);
    }
}
