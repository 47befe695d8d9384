//! The live token of one stored login: what an `oauth` provider or service sends as its key,
//! and the refresh of the Kimi Code credential (`docs/subcommands.md` §3.7, §3.8).
//!
//! Invariants:
//! * one manager per (share dir, key) in the process, so the chat provider, the search and fetch
//!   services and the background tick see the same token and never refresh it twice at once:
//!   refreshes are single-flight (an async gate), and a refresh that waited for another one
//!   adopts its result instead of sending a second request;
//! * the credential file is re-read before every refresh (under the cross-process lock when it
//!   can be had): a token another process rotated is adopted, not refreshed again;
//! * only the Kimi Code credential (`oauth/kimi-code`) is ever refreshed; other keys are static
//!   files, re-read when a token is wanted and none is cached;
//! * a refresh the server rejects (401/403) keeps the file, drops the in-memory access token (so
//!   the provider falls back to its `api_key`) and does not send that refresh token again for
//!   300 s; other failures keep the old token in use and pause unforced refreshes for 60 s;
//! * the state lock is never held across an await point.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

use super::credential::{self, Credential, now_epoch};
use super::endpoints::{self, RefreshFailure};
use crate::llm::settings::{OAuthRef, OAuthStorage};

/// The Kimi Code credential: the only one kiwi refreshes.
pub const KIMI_CODE_KEY: &str = "oauth/kimi-code";
/// A rejected refresh token is not sent again for this long.
const REJECTED_FOR: Duration = Duration::from_secs(300);
/// Wait after a rejection before re-reading the file (a concurrent rotation wins).
const AFTER_REJECTION: Duration = Duration::from_secs(1);
/// After a failed refresh (not a rejection), unforced refreshes wait this long: a down account
/// server must not cost every LLM call three attempts.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(60);
/// Background tick, and the gap between ticks that means the machine slept.
const TICK: Duration = Duration::from_secs(60);
const SLEPT: Duration = Duration::from_secs(120);

/// Refresh when less than max(300, expires_in / 2) seconds are left (300 when `expires_in` is
/// unknown), or when the expiry is unknown or past.
pub fn is_due(c: &Credential, now: f64) -> bool {
    if c.expires_at <= 0.0 {
        return true;
    }
    let threshold = if c.expires_in > 0.0 { (0.5 * c.expires_in).max(300.0) } else { 300.0 };
    c.expires_at - now < threshold
}

/// What a refresh came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Refreshed {
    /// Nothing was due (or the key is not refreshable): the token in use stays.
    Unchanged,
    /// A new token is in use (from the server, or adopted from the file).
    Updated,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RefreshError {
    /// There is no stored login to refresh.
    NoCredential,
    /// The server rejected the refresh token (now, or less than 300 s ago).
    Rejected(String),
    Failed(String),
}

impl std::fmt::Display for RefreshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefreshError::NoCredential => f.write_str("no stored login"),
            RefreshError::Rejected(m) | RefreshError::Failed(m) => f.write_str(m),
        }
    }
}

#[derive(Default)]
struct State {
    /// The credential as last read, refreshed or adopted.
    cached: Option<Credential>,
    /// The server rejected this credential's refresh token: its access token is not sent.
    dropped: bool,
    /// The refresh token the server rejected, and when.
    rejected: Option<(String, Instant)>,
    /// When the last refresh failed for another reason (network, 5xx, bad answer).
    failed_at: Option<Instant>,
}

impl State {
    fn pausing(&self) -> bool {
        self.failed_at.is_some_and(|at| at.elapsed() < PAUSE_AFTER_FAILURE)
    }
}

pub struct TokenManager {
    key: String,
    /// `None` when the key names no file (then there is never a token).
    path: Option<PathBuf>,
    lock_path: Option<PathBuf>,
    refreshable: bool,
    state: Mutex<State>,
    gate: tokio::sync::Mutex<()>,
    ticking: AtomicBool,
}

type Registry = Mutex<HashMap<(PathBuf, String), Weak<TokenManager>>>;
static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default);

/// The process's manager for this login (created on first use, shared while anyone holds it).
pub fn manager(share: &Path, oauth: &OAuthRef) -> Arc<TokenManager> {
    let mut registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    registry.retain(|_, weak| weak.strong_count() > 0);
    let id = (share.to_path_buf(), oauth.key.clone());
    if let Some(existing) = registry.get(&id).and_then(Weak::upgrade) {
        return existing;
    }
    let manager = Arc::new(TokenManager::new(share, oauth));
    registry.insert(id, Arc::downgrade(&manager));
    manager
}

/// Forgets what this process cached of a login (after a logout deleted its file): the next
/// call reads the file again, and finds none.
pub fn forget(share: &Path, key: &str) {
    let registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(manager) = registry.get(&(share.to_path_buf(), key.to_string())).and_then(Weak::upgrade) {
        *manager.state() = State::default();
    }
}

impl TokenManager {
    fn new(share: &Path, oauth: &OAuthRef) -> Self {
        let path = credential::path_for(share, &oauth.key);
        match &path {
            None => tracing::warn!(key = %oauth.key, "this oauth key names no credential file; using api_key"),
            Some(p) if oauth.storage == OAuthStorage::Keyring => tracing::warn!(
                key = %oauth.key,
                path = %p.display(),
                "oauth storage \"keyring\": kiwi does not support the system keyring and reads the credential file"
            ),
            Some(_) => {}
        }
        Self {
            key: oauth.key.clone(),
            lock_path: credential::lock_path_for(share, &oauth.key),
            path,
            refreshable: oauth.key == KIMI_CODE_KEY,
            state: Mutex::new(State::default()),
            gate: tokio::sync::Mutex::new(()),
            ticking: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_file(&self) -> Option<Credential> {
        self.path.as_deref().and_then(credential::read)
    }

    pub fn refreshable(&self) -> bool {
        self.refreshable
    }

    /// The key to send: the cached access token, else the stored one (even if expired); `None`
    /// when there is none or the server rejected it (the caller then uses its `api_key`).
    pub fn access_token(&self) -> Option<String> {
        let mut state = self.state();
        if state.cached.as_ref().is_none_or(|c| !c.is_usable()) && !state.dropped {
            state.cached = self.read_file();
        }
        if state.dropped {
            return None;
        }
        state.cached.as_ref().filter(|c| c.is_usable()).map(|c| c.access_token.clone())
    }

    /// The credential a refresh would start from (read from the file when nothing is cached).
    fn current(&self) -> Option<Credential> {
        let mut state = self.state();
        if state.cached.is_none() {
            state.cached = self.read_file();
        }
        state.cached.clone()
    }

    fn adopt(&self, credential: Credential) {
        let mut state = self.state();
        state.cached = Some(credential);
        state.dropped = false;
        state.rejected = None;
        state.failed_at = None;
    }

    /// Refreshes when due (start-up, each LLM call, the background tick). Failures are logged
    /// only: the old token stays in use.
    pub async fn refresh_if_due(&self) {
        if let Err(e) = self.refresh(false).await
            && e != RefreshError::NoCredential
        {
            tracing::warn!(key = %self.key, error = %e, "token refresh failed; keeping the current token");
        }
    }

    /// The forced refresh after a 401: `true` when a different token is now in use.
    pub async fn force_refresh(&self) -> bool {
        if !self.refreshable {
            // A static credential can only have been replaced on disk (e.g. by a new login).
            let before = self.state().cached.clone();
            let now = self.read_file();
            let changed = now.as_ref().is_some_and(|c| c.is_usable() && Some(c) != before.as_ref());
            if let Some(c) = now.filter(|_| changed) {
                self.adopt(c);
            }
            return changed;
        }
        match self.refresh(true).await {
            Ok(Refreshed::Updated) => true,
            Ok(Refreshed::Unchanged) => false,
            Err(e) => {
                tracing::warn!(key = %self.key, error = %e, "forced token refresh failed");
                false
            }
        }
    }

    /// The refresh of §3.8. Unforced, nothing happens unless the token is due.
    pub async fn refresh(&self, force: bool) -> Result<Refreshed, RefreshError> {
        if !self.refreshable {
            return Ok(Refreshed::Unchanged);
        }
        let Some(before) = self.current() else { return Err(RefreshError::NoCredential) };
        let dropped = self.state().dropped;
        if !force && (self.state().pausing() || (!dropped && !is_due(&before, now_epoch()))) {
            return Ok(Refreshed::Unchanged);
        }
        let _gate = self.gate.lock().await;
        if !force && self.state().pausing() {
            // The refresh we waited for failed; trying again at once would fail the same way.
            return Ok(Refreshed::Unchanged);
        }
        let _lock = match &self.lock_path {
            Some(p) => credential::lock(p).await,
            None => None,
        };
        // Another task or process may have refreshed while we waited.
        if let Some(adopted) = self.adopt_newer(&before, force || dropped) {
            return Ok(adopted);
        }
        let refresh_token = before.refresh_token.clone();
        if refresh_token.is_empty() {
            return Err(RefreshError::NoCredential);
        }
        if let Some((rejected, at)) = &self.state().rejected
            && *rejected == refresh_token
            && at.elapsed() < REJECTED_FOR
        {
            // Unforced, this is the expected quiet state until the user logs in again.
            return match force {
                true => Err(RefreshError::Rejected("this refresh token was rejected less than 300 s ago".into())),
                false => Ok(Refreshed::Unchanged),
            };
        }
        tracing::info!(key = %self.key, force, "refreshing the login token");
        match endpoints::refresh(&refresh_token).await {
            Ok(fresh) => {
                if let Some(path) = &self.path
                    && let Err(e) = credential::write(path, &fresh)
                {
                    tracing::warn!(path = %path.display(), error = %e, "cannot save the refreshed login");
                }
                self.adopt(fresh);
                tracing::info!(key = %self.key, "login token refreshed");
                Ok(Refreshed::Updated)
            }
            Err(RefreshFailure::Rejected(message)) => {
                tokio::time::sleep(AFTER_REJECTION).await;
                if let Some(disk) = self.read_file().filter(|d| d.is_usable() && d.refresh_token != refresh_token) {
                    self.adopt(disk);
                    return Ok(Refreshed::Updated);
                }
                let mut state = self.state();
                state.dropped = true;
                state.rejected = Some((refresh_token, Instant::now()));
                Err(RefreshError::Rejected(message))
            }
            Err(RefreshFailure::Failed(message)) => {
                self.state().failed_at = Some(Instant::now());
                Err(RefreshError::Failed(message))
            }
        }
    }

    /// After waiting for the gate and the lock: a token different from `before` (in memory or on
    /// disk) is adopted; unless `must_renew` (forced, or the current token was rejected), so is
    /// one that is no longer due.
    fn adopt_newer(&self, before: &Credential, must_renew: bool) -> Option<Refreshed> {
        let cached = self.state().cached.clone();
        if let Some(c) = cached.filter(|c| c.is_usable() && c.refresh_token != before.refresh_token) {
            self.adopt(c);
            return Some(Refreshed::Updated);
        }
        let disk = self.read_file().filter(Credential::is_usable)?;
        if disk.refresh_token != before.refresh_token {
            self.adopt(disk);
            return Some(Refreshed::Updated);
        }
        if !must_renew && !is_due(&disk, now_epoch()) {
            let changed = disk != *before;
            self.adopt(disk);
            return Some(if changed { Refreshed::Updated } else { Refreshed::Unchanged });
        }
        None
    }

    /// Starts the background refresh (once per manager): a refresh-if-due now, then every 60 s,
    /// forced after a gap of more than 120 s between ticks (the machine slept). It runs on its
    /// own small thread and runtime, so it needs no runtime from its caller, and it ends at the
    /// first tick after the last user of this manager is gone.
    pub fn start_background(self: &Arc<Self>) {
        if !self.refreshable || self.ticking.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new().name("kiwi-token-refresh".into()).spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                tracing::warn!("cannot start the background token refresh");
                return;
            };
            runtime.block_on(async move {
                let mut last = SystemTime::now();
                let mut first = true;
                while let Some(manager) = weak.upgrade() {
                    // Wall-clock time: the monotonic clock stands still while the machine sleeps.
                    let gap = SystemTime::now().duration_since(last).unwrap_or(Duration::ZERO);
                    last = SystemTime::now();
                    let force = !first && gap > SLEPT;
                    first = false;
                    if force {
                        if let Err(e) = manager.refresh(true).await {
                            tracing::warn!(error = %e, "token refresh after a sleep failed");
                        }
                    } else {
                        manager.refresh_if_due().await;
                    }
                    drop(manager);
                    tokio::time::sleep(TICK).await;
                }
            });
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the background token refresh");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(expires_at: f64, expires_in: f64) -> Credential {
        Credential {
            access_token: "a".into(),
            refresh_token: "r".into(),
            expires_at,
            scope: String::new(),
            token_type: "Bearer".into(),
            expires_in,
        }
    }

    #[test]
    fn due_threshold() {
        let now = 10_000.0;
        assert!(is_due(&cred(0.0, 900.0), now), "unknown expiry");
        assert!(is_due(&cred(now - 1.0, 900.0), now), "expired");
        assert!(is_due(&cred(now + 299.0, 0.0), now));
        assert!(!is_due(&cred(now + 301.0, 0.0), now));
        // Half of a long lifetime wins over 300 s.
        assert!(is_due(&cred(now + 1000.0, 3600.0), now));
        assert!(!is_due(&cred(now + 1900.0, 3600.0), now));
        assert!(is_due(&cred(now + 100.0, 900.0), now));
    }

    #[test]
    fn managers_are_shared_and_static_keys_never_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let r = |key: &str| OAuthRef { storage: OAuthStorage::File, key: key.into() };
        let a = manager(dir.path(), &r(KIMI_CODE_KEY));
        let b = manager(dir.path(), &r(KIMI_CODE_KEY));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.refreshable());
        let other = manager(dir.path(), &r("oauth/other"));
        assert!(!other.refreshable());
        assert_eq!(other.access_token(), None);
        credential::write(&dir.path().join("credentials/other.json"), &cred(1.0, 1.0)).unwrap();
        assert_eq!(other.access_token().as_deref(), Some("a"), "a login made later is picked up");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert_eq!(rt.block_on(other.refresh(true)), Ok(Refreshed::Unchanged));
        assert!(!rt.block_on(other.force_refresh()), "same file: nothing changed");
        let nowhere = manager(dir.path(), &r("oauth/.."));
        assert_eq!(nowhere.access_token(), None);
        assert_eq!(rt.block_on(a.refresh(false)), Err(RefreshError::NoCredential));
    }

    #[test]
    fn a_forgotten_login_is_not_sent_once_its_file_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let oauth = OAuthRef { storage: OAuthStorage::File, key: "oauth/gone".into() };
        let m = manager(dir.path(), &oauth);
        let file = dir.path().join("credentials/gone.json");
        credential::write(&file, &cred(1.0, 1.0)).unwrap();
        assert_eq!(m.access_token().as_deref(), Some("a"));
        std::fs::remove_file(&file).unwrap();
        assert_eq!(m.access_token().as_deref(), Some("a"), "cached until forgotten");
        forget(dir.path(), "oauth/gone");
        assert_eq!(m.access_token(), None);
    }
}
