//! Where the sessions of an ACP client live. Over stdio the ACP process opens and owns each one
//! itself ([`OwnSessions`]); `kiwi web`'s `/api/acp` hands them to the web server, which hosts
//! them for all its clients, the browser's sockets included (`docs/web.md` §6). The dispatcher
//! and the sessions reach a session's lifecycle only through this seam, so the protocol is the
//! same on every transport.
//!
//! Invariants: a host attaches the client's projection before it answers `open`, so the client
//! sees every message of the session from then on; a turn started through [`HostedSession`]
//! ends at this client's projection (`turn_ended`), never at another client's.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::errors;
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{CloseReason, LiveSession, Sessions};
use crate::protocol::UserInput;
use crate::rpc::{ErrorObject, RequestId};
use crate::soul::{Busy, Projection, TurnTag};
use crate::wire::host::Hosting;

/// Makes the client's projection once the session's id is known and whether other clients
/// share the session (`true`: requests this client cannot answer are left to them).
pub type MakeProjection = Box<dyn FnOnce(&str, bool) -> Arc<dyn Projection> + Send>;

/// Opens sessions for one ACP client.
pub trait SessionHost: Send + Sync {
    /// Opens the session `request` names (built from `setup`), or joins it where the host has it
    /// open already; the projection `make` returns is attached to its stream either way.
    fn open(
        &self,
        setup: AgentSetup,
        request: SessionRequest,
        make: MakeProjection,
    ) -> BoxFuture<'_, Result<Arc<dyn HostedSession>, ErrorObject>>;

    /// A stored session another process holds is attached to (through its `live.sock`,
    /// `docs/host.md`) rather than opened here.
    fn attaches(&self) -> bool {
        false
    }
}

/// One session as one client holds it.
pub trait HostedSession: Send + Sync {
    fn live(&self) -> &Arc<LiveSession>;
    /// The session is this client's alone: the client's terminal and files may serve its tools
    /// (a shared session keeps kiwi's own, which outlive the client).
    fn exclusive(&self) -> bool;
    /// Starts the turn of the prompt `id`; its outcome goes back to this client (tagged with
    /// `id`). `Err(Busy)` while a turn runs.
    fn start_turn(&self, input: UserInput, id: &RequestId) -> Result<(), Busy>;
    /// The `SessionStart` hooks, where this client's opening is what starts the session.
    fn start_hooks(&self) -> BoxFuture<'_, ()>;
    /// `session/close`: this client is done with the session.
    fn close(&self) -> BoxFuture<'_, ()>;
    /// The client went away (EOF, a signal, its socket closed).
    fn disconnect(&self);
}

/// `kiwi acp`: every session is opened in this process, for this client alone, and hosted on
/// its folder's `live.sock` while it is open, so other kiwi processes attach to it
/// (`docs/host.md`).
pub struct OwnSessions {
    pub sessions: Sessions,
    /// `server.version` an attached wire client's `initialize` reports.
    pub version: String,
}

impl SessionHost for OwnSessions {
    fn attaches(&self) -> bool {
        true
    }

    fn open(
        &self,
        setup: AgentSetup,
        request: SessionRequest,
        make: MakeProjection,
    ) -> BoxFuture<'_, Result<Arc<dyn HostedSession>, ErrorObject>> {
        Box::pin(async move {
            let built = build(setup, request).await?;
            let projection = make(&built.session.id, false);
            let live = LiveSession::open(built, projection, &self.sessions);
            let hosting = crate::wire::host::serve(live.clone(), self.version.clone())
                .inspect_err(|e| tracing::warn!("cannot serve the session on its socket: {e}"))
                .ok();
            Ok(Arc::new(Own { live, hosting: Mutex::new(hosting) }) as Arc<dyn HostedSession>)
        })
    }
}

/// Builds a session on a blocking thread (loading a long one reads files), with ACP's errors.
pub async fn build(setup: AgentSetup, request: SessionRequest) -> Result<crate::builder::BuiltSession, ErrorObject> {
    let built = tokio::task::spawn_blocking(move || setup.build(request))
        .await
        .map_err(|e| errors::internal(format!("opening the session failed: {e}")))?;
    built.map_err(|e| match e {
        BuildError::Usage(m) => errors::invalid_params(m),
        BuildError::Fatal(m) => errors::internal(m),
    })
}

/// A session this process opened for its one client (the client's projection is its first
/// subscriber, so untagged turn outcomes reach it).
struct Own {
    live: Arc<LiveSession>,
    /// The session served on its socket; dropped (the file removed, attached processes' streams
    /// ended) before the session closes and its lock is released.
    hosting: Mutex<Option<Hosting>>,
}

impl Own {
    fn stop_hosting(&self) {
        drop(self.hosting.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl HostedSession for Own {
    fn live(&self) -> &Arc<LiveSession> {
        &self.live
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn start_turn(&self, input: UserInput, id: &RequestId) -> Result<(), Busy> {
        self.live.driver().start(input, TurnTag::new(id.clone()))
    }

    fn start_hooks(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.live.start())
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.stop_hosting();
            self.live.close(CloseReason::Closed).await;
        })
    }

    /// The process shell closes the session after this; its turn is cancelled now.
    fn disconnect(&self) {
        self.stop_hosting();
        self.live.driver().cancel();
    }
}
