//! Stored sessions seen from ACP: the history `session/load` replays (the session's `wire.jsonl`
//! through the same mapping as live events, `docs/acp.md` §4.5) and the list `session/list` returns.
//! Where a session lives is the session store's to say, never rebuilt here.

use std::path::Path;

use agent_client_protocol::v1::schema::SessionInfo;

use super::mapping::EventMapper;
use super::projection::send_update;
use crate::protocol::WireMessage;
use crate::rpc::Outbound;
use crate::session::store;
use crate::session::wire_read;

/// Records sent between two yields, so a long history does not starve the dispatcher.
const YIELD_EVERY: usize = 64;

/// Sends the session's history as `session/update`s; `Err` with a log-worthy reason.
pub async fn replay(wire_path: &Path, cwd: &Path, session_id: &str, outbound: &Outbound) -> Result<(), String> {
    let Some(records) = wire_read::open(wire_path).map_err(|e| format!("cannot open {}: {e}", wire_path.display()))?
    else {
        return Ok(());
    };
    let mut mapper = EventMapper::new(cwd.to_path_buf(), true);
    for (n, record) in records.enumerate() {
        if n % YIELD_EVERY == YIELD_EVERY - 1 {
            tokio::task::yield_now().await;
        }
        let record = record.map_err(|e| format!("cannot read {}: {e}", wire_path.display()))?;
        // Requests in the file (questions, external tool calls) were answered then; their
        // outcome is in the events.
        let WireMessage::Event(event) = record else { continue };
        for update in mapper.map(&event) {
            send_update(outbound, session_id, update).await;
        }
    }
    Ok(())
}

/// Whether `id` names a stored session of `cwd`, found as opening it would find it.
pub fn exists(share: &Path, cwd: &Path, id: &str) -> bool {
    store::stored_session(share, cwd, id).is_some()
}

/// The sessions of `cwd`, most recently changed first (`docs/acp.md` §4.7).
pub fn list(share: &Path, cwd: &Path) -> Vec<SessionInfo> {
    let Ok(entries) = std::fs::read_dir(store::sessions_dir(share, cwd)) else { return Vec::new() };
    let mut found: Vec<(std::time::SystemTime, SessionInfo)> = entries
        .flatten()
        .filter_map(|entry| {
            let id = entry.file_name().to_string_lossy().to_string();
            let context = entry.path().join("context.jsonl");
            let modified = std::fs::metadata(&context).and_then(|m| m.modified()).ok()?;
            let state = crate::session::state::load(&entry.path());
            let title = match state.custom_title {
                Some(t) if !t.is_empty() => format!("{t} ({id})"),
                _ => format!("Untitled ({id})"),
            };
            let updated: chrono::DateTime<chrono::Local> = modified.into();
            let info = SessionInfo::new(id, cwd.to_path_buf()).title(title).updated_at(updated.to_rfc3339());
            Some((modified, info))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, info)| info).collect()
}
