//! What the connected client can do (`docs/protocol-1.10.md` §2.2): answer questions, show plan mode.
//! Set by the front end's handshake; read by the step (which tools the model sees) and by the
//! tools' host (whether a question can be asked at all).
//!
//! Invariants: before any handshake nothing is hidden from the model and questions count as
//! unsupported; a handshake without capabilities keeps the flags it found.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::tools::client_files::ClientFiles;

/// The question tool, hidden from the model unless the client answers questions.
pub const QUESTION_TOOL: &str = "AskUserQuestion";
/// The plan-mode tools, hidden from the model unless the client shows plan mode.
pub const PLAN_TOOLS: [&str; 2] = ["EnterPlanMode", "ExitPlanMode"];

#[derive(Debug, Default)]
pub struct ClientState {
    initialized: AtomicBool,
    supports_question: AtomicBool,
    supports_plan_mode: AtomicBool,
    /// The client's files (ACP clients that offer `fs`), for the file tools.
    files: FilesSlot,
}

#[derive(Default)]
struct FilesSlot(RwLock<Option<Arc<dyn ClientFiles>>>);

impl std::fmt::Debug for FilesSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FilesSlot")
    }
}

impl ClientState {
    /// A handshake: `capabilities` replaces both flags when present.
    pub fn handshake(&self, capabilities: Option<(bool, bool)>) {
        if let Some((question, plan_mode)) = capabilities {
            self.supports_question.store(question, Ordering::SeqCst);
            self.supports_plan_mode.store(plan_mode, Ordering::SeqCst);
        }
        self.initialized.store(true, Ordering::SeqCst);
    }

    pub fn initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    pub fn supports_question(&self) -> bool {
        self.supports_question.load(Ordering::SeqCst)
    }

    pub fn supports_plan_mode(&self) -> bool {
        self.supports_plan_mode.load(Ordering::SeqCst)
    }

    /// The client serves file contents from now on.
    pub fn set_files(&self, files: Arc<dyn ClientFiles>) {
        *self.files.0.write().unwrap_or_else(|p| p.into_inner()) = Some(files);
    }

    pub fn files(&self) -> Option<Arc<dyn ClientFiles>> {
        self.files.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the model is shown the tool `name` (hidden tools still run when called).
    pub fn shows_tool(&self, name: &str) -> bool {
        if !self.initialized() {
            return true;
        }
        if name == QUESTION_TOOL {
            return self.supports_question();
        }
        if PLAN_TOOLS.contains(&name) {
            return self.supports_plan_mode();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_follows_the_handshake() {
        let c = ClientState::default();
        assert!(c.shows_tool(QUESTION_TOOL) && c.shows_tool("EnterPlanMode"), "nothing hidden before");
        assert!(!c.supports_question());
        c.handshake(None);
        assert!(!c.shows_tool(QUESTION_TOOL) && !c.shows_tool("ExitPlanMode") && c.shows_tool("Shell"));
        c.handshake(Some((true, false)));
        assert!(c.shows_tool(QUESTION_TOOL) && !c.shows_tool("EnterPlanMode"));
        c.handshake(None);
        assert!(c.supports_question(), "absent capabilities keep the flags");
    }
}
