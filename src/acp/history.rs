//! Stored sessions seen from ACP: the history `session/load` replays (the session's `wire.jsonl`,
//! streamed by the one history replay, through the same mapping as live events, `docs/acp.md` §4.5) and the list `session/list` returns.
//! Where a session lives is the session store's to say, never rebuilt here.

use std::path::Path;

use agent_client_protocol::v1::schema::SessionInfo;

use super::client_profile::Updates;
use super::mapping::EventMapper;
use crate::live::History;
use crate::protocol::WireMessage;
use crate::session::store;
use crate::session::wire_read;

/// Records read per batch of the one history replay.
const BATCH: usize = 256;

/// Sends the session's history as `session/update`s, streamed from disk by the one history
/// replay (`live::history`); `Err` with a log-worthy reason.
pub async fn replay(wire_path: &Path, cwd: &Path, session_id: &str, updates: &Updates) -> Result<(), String> {
    // Requests in the file (questions, external tool calls) were answered then; their outcome
    // is in the events.
    let mut batches = History::whole(wire_path.to_path_buf()).stream(BATCH, |line| match wire_read::parse(line)? {
        WireMessage::Event(event) => Some(event),
        WireMessage::Request(_) => None,
    });
    let mut mapper = EventMapper::new(cwd.to_path_buf(), true);
    while let Some(batch) = batches.next().await {
        send_events(&mut mapper, batch?.into_iter(), session_id, updates).await;
        // A long history does not starve the dispatcher.
        tokio::task::yield_now().await;
    }
    Ok(())
}

/// Sends history events as `session/update`s through a replay mapper: a batch of the file's, or
/// of a host's history for an attached session (`acp::attached`).
pub async fn send_events(
    mapper: &mut EventMapper,
    events: impl Iterator<Item = crate::protocol::Event>,
    session_id: &str,
    updates: &Updates,
) {
    for event in events {
        for update in mapper.map(&event) {
            updates.send(session_id, update).await;
        }
    }
}

/// Whether `id` names a stored session of `cwd`, found as opening it would find it.
pub fn exists(share: &Path, cwd: &Path, id: &str) -> bool {
    store::stored_session(share, cwd, id).is_some()
}

/// Sessions listed per page of `session/list`.
pub const PAGE: usize = 50;

/// One page of the sessions of `cwd`, or of every work dir `kimi.json` knows when `cwd` is
/// `None`, most recently changed first (`docs/acp.md` §4.7). `cursor` is the opaque string of an
/// earlier page's `nextCursor`; `Err` for one kiwi did not hand out.
pub fn list_page(
    share: &Path,
    cwd: Option<&Path>,
    cursor: Option<&str>,
) -> Result<(Vec<SessionInfo>, Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => c.parse::<usize>().map_err(|_| format!("invalid cursor `{c}`"))?,
    };
    let mut found = match cwd {
        Some(cwd) => list_dir(share, cwd),
        None => {
            let mut all = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for entry in store::Metadata::load(share).work_dirs {
                if seen.insert(entry.path.clone()) {
                    all.extend(list_dir(share, Path::new(&entry.path)));
                }
            }
            all
        }
    };
    // Newest first; ties by id, so pages never overlap.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.session_id.0.cmp(&a.1.session_id.0)));
    if start > found.len() {
        return Err(format!("invalid cursor `{start}`"));
    }
    let next = (found.len() > start + PAGE).then(|| (start + PAGE).to_string());
    Ok((found.into_iter().skip(start).take(PAGE).map(|(_, info)| info).collect(), next))
}

/// The sessions of `cwd`, most recently changed first.
pub fn list(share: &Path, cwd: &Path) -> Vec<SessionInfo> {
    let mut found = list_dir(share, cwd);
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, info)| info).collect()
}

/// The sessions stored for `cwd`, with the time each last changed.
fn list_dir(share: &Path, cwd: &Path) -> Vec<(std::time::SystemTime, SessionInfo)> {
    let Ok(entries) = std::fs::read_dir(store::sessions_dir(share, cwd)) else { return Vec::new() };
    entries
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
            let dirs = state.additional_dirs.iter().map(std::path::PathBuf::from).collect();
            let info = SessionInfo::new(id, cwd.to_path_buf())
                .additional_directories(dirs)
                .title(title)
                .updated_at(updated.to_rfc3339());
            Some((modified, info))
        })
        .collect()
}
