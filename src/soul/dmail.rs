//! D-Mail (`docs/soul.md` §11): the `SendDMail` tool lets the model send a message to an earlier
//! checkpoint; at the end of the step the context is rolled back to just before that checkpoint
//! and the message is handed to the model as a note from its future self.
//!
//! Invariants: at most one D-Mail is pending; a step with a user rejection discards it; the
//! rollback rotates `context.jsonl` like `/clear` does, so nothing is lost on disk.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::protocol::ToolReturnValue;
use crate::tools::{ToolCallContext, TypedTool};

/// A D-Mail waiting for the end of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DMail {
    pub checkpoint_id: u64,
    pub message: String,
}

/// Shared between the tool (which posts) and the soul (which delivers and counts checkpoints).
#[derive(Debug, Default)]
pub struct DMailBox {
    state: Mutex<(Option<DMail>, u64)>,
}

impl DMailBox {
    pub fn set_checkpoints(&self, n: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = n;
        }
    }

    pub fn take(&self) -> Option<DMail> {
        self.state.lock().ok().and_then(|mut s| s.0.take())
    }

    fn post(&self, checkpoint_id: i64, message: String) -> Result<(), &'static str> {
        let mut s = self.state.lock().map_err(|_| "D-Mail state is unavailable")?;
        if s.0.is_some() {
            return Err("Only one D-Mail can be sent at a time");
        }
        match u64::try_from(checkpoint_id) {
            Ok(id) if id < s.1 => {
                s.0 = Some(DMail { checkpoint_id: id, message });
                Ok(())
            }
            _ => Err("There is no checkpoint with the given ID"),
        }
    }
}

pub struct SendDMail {
    pub mailbox: Arc<DMailBox>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SendDMailParams {
    /// What your past self should know.
    pub message: String,
    /// The checkpoint to send the message back to (0 or more).
    pub checkpoint_id: i64,
}

impl TypedTool for SendDMail {
    type Params = SendDMailParams;
    const NAME: &'static str = "SendDMail";

    fn description(&self) -> String {
        include_str!("dmail.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: SendDMailParams, _ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            match self.mailbox.post(params.checkpoint_id, params.message) {
                Ok(()) => {
                    let mut ok = ToolReturnValue::ok(
                        "",
                        "The D-Mail is on its way. Carry on as if nothing happened; the timeline will sort itself out.",
                    );
                    ok.display = vec![crate::protocol::DisplayBlock::brief("El Psy Kongroo")];
                    ok
                }
                Err(e) => ToolReturnValue::error(format!("Failed to send D-Mail. Error: {e}"), "Failed to send D-Mail"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posting_rules() {
        let b = DMailBox::default();
        assert_eq!(b.post(0, "x".into()), Err("There is no checkpoint with the given ID"));
        b.set_checkpoints(2);
        assert_eq!(b.post(-1, "x".into()), Err("There is no checkpoint with the given ID"));
        assert_eq!(b.post(2, "x".into()), Err("There is no checkpoint with the given ID"));
        assert_eq!(b.post(1, "x".into()), Ok(()));
        assert_eq!(b.post(0, "y".into()), Err("Only one D-Mail can be sent at a time"));
        assert_eq!(b.take(), Some(DMail { checkpoint_id: 1, message: "x".into() }));
        assert_eq!(b.take(), None);
    }
}
