//! What an ACP client can take, judged once from its `initialize` (`docs/acp.md` §4.1,
//! `docs/compatibility.md`), and the one place `session/update`s leave kiwi, filtered by it.
//!
//! ACP's TypeScript SDK parses every `session/update` against the update kinds of its own schema
//! and answers an unknown kind with an error, so an agent must not send a kind the client's SDK
//! is older than. The client does not say its schema version; what it sends does tell:
//! `clientCapabilities` gained `auth` (SDK 0.15) after `session_info_update`,
//! `config_option_update` (0.12) and `usage_update` (0.14), and every member added since
//! (`session`, `elicitation`, `plan`, …) is newer still. A client whose capabilities hold nothing
//! but `fs`, `terminal` and `_meta` may be as old as the 0.4 SDK and gets only the eight kinds
//! that SDK knows. A client can also ask outright through `clientCapabilities._meta.kiwi`:
//! `{"extensions": ["updates", "undo", "fork"]}` (`updates`: every standard kind; `undo`: kiwi's
//! `_kiwi/undo` method and `/undo`, advertised only then; `fork`: `/fork` listed).
//!
//! The same sign of a newer schema (a member beyond `fs`, `terminal`, `_meta`) unlocks the rest
//! of ACP's newer surface: `sessionCapabilities.delete` and `.additionalDirectories` and
//! `auth.logout` in `initialize`, `messageId` on message chunks and `usage` in `PromptResponse`
//! (both known to the SDK since before `auth`). Boolean config options go only to a client that
//! says it takes them (`clientCapabilities.session.configOptions.boolean`): an SDK without them
//! rejects a whole answer that holds one.

use std::sync::{Arc, RwLock};

use agent_client_protocol::v1::schema::SessionUpdate;
use serde_json::Value;

use super::projection::send_update;
use crate::rpc::Outbound;

/// The capability members of the schema the 0.4 SDK knows; any other member shows a newer client.
const OLDEST_MEMBERS: &[&str] = &["fs", "terminal", "_meta"];

/// What the client showed it can take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientProfile {
    /// The update kinds newer than the 0.4 SDK (`session_info_update`, `config_option_update`,
    /// `usage_update`) may be sent.
    pub newer_updates: bool,
    /// The client asked for kiwi's `undo` extension: `_kiwi/undo` is named in `initialize` and
    /// `/undo` listed in `available_commands_update`.
    pub undo: bool,
    /// The client asked for kiwi's `fork` extension: `/fork` is listed (`session/fork` is ACP's
    /// own, offered to everyone).
    pub fork: bool,
    /// The client's schema is newer than the 0.4 SDK's (it sent a newer capability member):
    /// `delete`, `logout` and `additionalDirectories` are advertised, chunks carry `messageId`
    /// and the prompt's answer its `usage`.
    pub newer_schema: bool,
    /// `clientCapabilities.session.configOptions.boolean`: `thinking` is a boolean option.
    pub boolean_options: bool,
}

impl ClientProfile {
    /// Judges the raw `initialize` params (a typed request would hide which members were sent).
    pub fn judge(params: &Value) -> Self {
        let caps = params.get("clientCapabilities").and_then(Value::as_object);
        let newer_member = caps.is_some_and(|c| c.keys().any(|k| !OLDEST_MEMBERS.contains(&k.as_str())));
        let asked: Vec<&str> = caps
            .and_then(|c| c.get("_meta"))
            .and_then(|m| m.pointer("/kiwi/extensions"))
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let boolean = caps
            .and_then(|c| c.get("session"))
            .and_then(|s| s.pointer("/configOptions/boolean"))
            .is_some_and(Value::is_object);
        Self {
            newer_updates: newer_member || asked.contains(&"updates"),
            undo: asked.contains(&"undo"),
            fork: asked.contains(&"fork"),
            newer_schema: newer_member,
            boolean_options: boolean,
        }
    }

    /// The kiwi extensions granted, by the names slash commands carry.
    pub fn extensions(&self) -> Vec<&'static str> {
        [("fork", self.fork), ("undo", self.undo)].into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect()
    }

    /// Whether the client's SDK can parse `update`.
    pub fn accepts(&self, update: &SessionUpdate) -> bool {
        match update {
            SessionUpdate::UserMessageChunk(_)
            | SessionUpdate::AgentMessageChunk(_)
            | SessionUpdate::AgentThoughtChunk(_)
            | SessionUpdate::ToolCall(_)
            | SessionUpdate::ToolCallUpdate(_)
            | SessionUpdate::Plan(_)
            | SessionUpdate::AvailableCommandsUpdate(_)
            | SessionUpdate::CurrentModeUpdate(_) => true,
            SessionUpdate::ConfigOptionUpdate(_)
            | SessionUpdate::SessionInfoUpdate(_)
            | SessionUpdate::UsageUpdate(_) => self.newer_updates,
            // Kinds newer still (and any the schema adds later) go to no client until kiwi knows
            // which clients take them.
            _ => false,
        }
    }
}

impl ClientProfile {
    /// `update` with what this client's schema does not have taken out: a message chunk's
    /// `messageId` for a client as old as the 0.4 SDK.
    pub fn fit(&self, mut update: SessionUpdate) -> SessionUpdate {
        if !self.newer_schema
            && let SessionUpdate::UserMessageChunk(chunk)
            | SessionUpdate::AgentMessageChunk(chunk)
            | SessionUpdate::AgentThoughtChunk(chunk) = &mut update
        {
            chunk.message_id = None;
        }
        update
    }
}

/// The connection's `session/update` sender: every update kiwi sends passes here, and one the
/// client could not parse is dropped (and logged at debug level).
#[derive(Clone)]
pub struct Updates {
    outbound: Outbound,
    profile: Arc<RwLock<ClientProfile>>,
}

impl Updates {
    pub fn new(outbound: Outbound) -> Self {
        Self { outbound, profile: Arc::default() }
    }

    /// Set by `initialize` (a second one replaces it).
    pub fn set_profile(&self, profile: ClientProfile) {
        *self.profile.write().unwrap_or_else(|p| p.into_inner()) = profile;
    }

    pub fn profile(&self) -> ClientProfile {
        *self.profile.read().unwrap_or_else(|p| p.into_inner())
    }

    pub async fn send(&self, session_id: &str, update: SessionUpdate) {
        let profile = self.profile();
        if !profile.accepts(&update) {
            tracing::debug!("not sent to this client (its ACP schema is older): {update:?}");
            return;
        }
        send_update(&self.outbound, session_id, profile.fit(update)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{SessionInfoUpdate, UsageUpdate};
    use serde_json::json;

    #[test]
    fn judged_from_what_the_client_sent() {
        let judge = |params: Value| ClientProfile::judge(&params);
        let old = judge(
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true}, "terminal": true}}),
        );
        assert_eq!(old, ClientProfile::default());
        // `clientInfo` is older than the newer kinds (SDK 0.5): it proves nothing.
        let with_info =
            judge(json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "x", "version": "1"}}));
        assert!(!with_info.newer_updates);
        assert!(judge(json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}})).newer_updates);
        assert!(
            judge(json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"form": {}}}})).newer_updates
        );
        let asked = judge(
            json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"kiwi": {"extensions": ["updates", "undo"]}}}}),
        );
        assert_eq!(asked, ClientProfile { newer_updates: true, undo: true, ..ClientProfile::default() });
        assert_eq!(asked.extensions(), ["undo"]);
        // Odd shapes ask for nothing.
        assert_eq!(
            judge(json!({"clientCapabilities": {"_meta": {"kiwi": {"extensions": "undo"}}}})),
            ClientProfile::default()
        );
        assert_eq!(judge(json!(null)), ClientProfile::default());
        // A newer member shows a newer schema; booleans need their own capability.
        let newer = judge(json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": false}}}));
        assert!(newer.newer_schema && !newer.boolean_options);
        let booleans =
            judge(json!({"protocolVersion": 1, "clientCapabilities": {"session": {"configOptions": {"boolean": {}}}}}));
        assert!(booleans.newer_schema && booleans.boolean_options);
        let no_booleans = judge(
            json!({"protocolVersion": 1, "clientCapabilities": {"session": {"configOptions": {"boolean": null}}}}),
        );
        assert!(no_booleans.newer_schema && !no_booleans.boolean_options);
        // Asking for the `updates` extension is not a newer schema.
        assert!(!asked.newer_schema);
    }

    #[test]
    fn message_ids_only_for_newer_clients() {
        use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk};
        let chunk = || {
            SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from("x".to_string())).message_id("m1"))
        };
        let json = |u: SessionUpdate| serde_json::to_value(u).unwrap();
        assert!(json(ClientProfile::default().fit(chunk())).get("messageId").is_none());
        let new = ClientProfile { newer_schema: true, ..ClientProfile::default() };
        assert_eq!(json(new.fit(chunk()))["messageId"], "m1");
    }

    #[test]
    fn newer_kinds_only_for_newer_clients() {
        let info = SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title("t".to_string()));
        let usage = SessionUpdate::UsageUpdate(UsageUpdate::new(1, 2));
        let old = ClientProfile::default();
        assert!(!old.accepts(&info) && !old.accepts(&usage));
        let new = ClientProfile { newer_updates: true, ..ClientProfile::default() };
        assert!(new.accepts(&info) && new.accepts(&usage));
    }
}
