//! The operations on a live session besides its turns: fork, undo, and the claim a `replay`
//! holds. Every front end calls these and only translates the outcome into its protocol, so the
//! busy rule (the turn driver's one busy slot: a turn, an undo and a replay exclude each other)
//! and the error vocabulary ([`OpError`]) are the same for all of them.

use std::path::PathBuf;

use crate::session::fork::{ForkError, Forked};
use crate::session::rewind::{RewindError, UndoTarget};
use crate::soul::BusyClaim;
use crate::soul::undo::UndoReport;

use super::session::LiveSession;

/// Why an operation on a live session did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// A turn (or another operation holding the busy slot) runs.
    #[error("the session is busy")]
    Busy,
    /// The request cannot be met (a turn out of range, nothing to undo, …): the client's to fix.
    #[error("{0}")]
    Invalid(String),
    /// Something failed underneath (I/O): logged, and the client hears the reason.
    #[error("{0}")]
    Failed(String),
}

impl LiveSession {
    /// A new session of the same work dir with this one's history up to now, or up to turn
    /// `turn` (`docs/sessions.md` §8); refused while a turn runs. This session goes on as it was.
    pub async fn fork(&self, turn: Option<u64>) -> Result<Forked, OpError> {
        let driver = self.driver();
        if driver.is_busy() {
            return Err(OpError::Busy);
        }
        driver.sink().flush_record();
        let env = driver.agent().env.clone();
        let forked = tokio::task::spawn_blocking(move || {
            crate::session::fork::fork(&env.share_dir, &env.work_dir, &env.session_dir, turn)
        })
        .await;
        match forked {
            Ok(Ok(forked)) => Ok(forked),
            Ok(Err(ForkError::Io(e))) => {
                tracing::error!("fork failed: {e}");
                Err(OpError::Failed(e))
            }
            Ok(Err(e)) => Err(OpError::Invalid(e.to_string())),
            Err(e) => Err(OpError::Failed(e.to_string())),
        }
    }

    /// The session back to before a turn, with kiwi's file edits restored (`docs/sessions.md`
    /// §9); refused while a turn runs.
    pub async fn undo(&self, target: UndoTarget) -> Result<UndoReport, OpError> {
        match self.driver().undo(target).await {
            Err(_) => Err(OpError::Busy),
            Ok(Ok(report)) => Ok(report),
            Ok(Err(RewindError::Io(e))) => {
                tracing::error!("undo failed: {e}");
                Err(OpError::Failed(e))
            }
            Ok(Err(e)) => Err(OpError::Invalid(e.to_string())),
        }
    }

    /// The busy slot for a `replay` and the file to replay, every record written so far in it;
    /// the slot is held until the claim is dropped (no turn starts meanwhile).
    pub fn claim_replay(&self) -> Result<(BusyClaim, PathBuf), OpError> {
        let claim = self.driver().claim().map_err(|_| OpError::Busy)?;
        self.driver().sink().flush_record();
        Ok((claim, self.wire_path()))
    }
}
