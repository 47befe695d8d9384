//! Shell in a sandboxed run (spec sandbox.md §6, §7): which calls ask, the escalation of one
//! command outside the sandbox, the parameters that ask for it, and the note a denied command's
//! result gets.
//!
//! Invariants:
//! * a sandboxed call runs under the session's current sandbox, with the policy computed for
//!   this command (the work dir and the added dirs as they are now);
//! * with `auto_approve` a sandboxed call sends no approval request; an escalation always asks
//!   (no session grant covers it: see `soul::approval`) or, where nobody may be asked, is refused
//!   without asking;
//! * `sandbox_permissions` and `justification` are in the schema only in sandboxed runs with
//!   `allow_escalation` ([`into_tool`]); elsewhere they are ignored like any unknown argument.

use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Exit, Shell, ShellParams};
use crate::agent_env::AgentEnv;
use crate::protocol::ToolReturnValue;
use crate::sandbox::{CommandPolicy, Sandbox};
use crate::tools::{Tool, ToolCallContext, Typed, TypedTool, invalid_arguments};

/// The approval action of a command the model asks to run outside the sandbox.
pub const ESCALATION_ACTION: &str = "run command outside the sandbox";
/// The same for `run_in_background`.
pub const ESCALATION_BACKGROUND_ACTION: &str = "run background command outside the sandbox";

/// Whether an approval action is an escalation (never granted for the session, never
/// approved by yolo or afk).
pub fn is_escalation_action(action: &str) -> bool {
    action == ESCALATION_ACTION || action == ESCALATION_BACKGROUND_ACTION
}

const REFUSED: &str = "Running commands outside the sandbox is not allowed in this session.";

/// `sandbox_permissions` (codex's names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxPermissions {
    #[default]
    UseDefault,
    RequireEscalated,
}

/// Shell's parameters in a sandboxed run that allows escalation.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EscalatableParams {
    #[serde(flatten)]
    pub shell: ShellParams,
    /// `use_default` (default) runs the command in the sandbox; `require_escalated` asks the
    /// user to run this one command outside it (only after the sandbox blocked it).
    #[serde(default)]
    pub sandbox_permissions: SandboxPermissions,
    /// Why the command must run outside the sandbox; required with `require_escalated`.
    #[serde(default)]
    pub justification: Option<String>,
}

/// What a call asked of the sandbox.
#[derive(Debug, Default)]
pub(super) struct Escalation {
    wanted: bool,
    justification: String,
}

impl Escalation {
    /// The validation error of an escalation without a justification.
    pub(super) fn check(&self) -> Option<ToolReturnValue> {
        (self.wanted && self.justification.trim().is_empty()).then(|| {
            invalid_arguments(
                "Error validating JSON arguments: justification is required when sandbox_permissions is \
                 require_escalated"
                    .into(),
            )
        })
    }
}

/// How one call runs: confined (with its policy), escalated, or as today (sandbox off).
pub(super) struct Confinement {
    sandbox: Arc<Sandbox>,
    /// Set when the command runs confined.
    pub(super) policy: Option<CommandPolicy>,
    /// Why this command's sandbox could not be prepared (it is not run).
    setup_error: Option<String>,
    /// The call asked to run outside the sandbox (in a sandboxed run).
    escalate: bool,
    justification: String,
    /// Somebody may be asked to approve an escalation.
    escalation_possible: bool,
}

impl Confinement {
    pub(super) fn of(ctx: &ToolCallContext, escalation: &Escalation) -> Self {
        let sandbox = ctx.env.sandbox.current();
        let presence = ctx.host.presence();
        let escalation_possible = sandbox.is_on()
            && sandbox.settings().allow_escalation
            && !presence.yolo
            && !presence.afk
            && !ctx.env.sandbox.nobody_to_ask();
        let escalate = sandbox.is_on() && escalation.wanted;
        let (policy, setup_error) = if sandbox.is_on() && !escalate {
            match sandbox.policy_for(&ctx.env.work_dir, &ctx.host.added_dirs()) {
                Ok(policy) => (Some(policy), None),
                Err(reason) => (None, Some(reason)),
            }
        } else {
            (None, None)
        };
        Self {
            sandbox,
            policy,
            setup_error,
            escalate,
            justification: escalation.justification.trim().to_string(),
            escalation_possible,
        }
    }

    /// The approval to ask for (action, description), `None` to run without asking, or the
    /// result that ends the call now.
    // The error is the finished tool result, handed straight back to the model; it is cold.
    #[allow(clippy::result_large_err)]
    pub(super) fn approval(
        &self,
        command: &str,
        background: bool,
    ) -> Result<Option<(&'static str, String)>, ToolReturnValue> {
        if let Some(reason) = &self.setup_error {
            return Err(self.spawn_failed(reason.clone()));
        }
        let (run, action) = if background {
            ("Run background command", "run background command")
        } else {
            ("Run command", "run command")
        };
        if self.escalate {
            if !self.escalation_possible {
                return Err(ToolReturnValue::error(REFUSED, "Escalation refused"));
            }
            let action = if background { ESCALATION_BACKGROUND_ACTION } else { ESCALATION_ACTION };
            return Ok(Some((action, format!("{run} `{command}` outside the sandbox: {}", self.justification))));
        }
        if self.policy.is_some() && self.sandbox.settings().auto_approve {
            return Ok(None);
        }
        Ok(Some((action, format!("{run} `{command}`"))))
    }

    /// The result of a command whose sandbox could not be set up.
    pub(super) fn spawn_failed(&self, reason: String) -> ToolReturnValue {
        ToolReturnValue::error(crate::sandbox::command_not_run_message(&reason), "Sandbox failed")
    }

    /// The note for a confined command's result (spec §7), with its leading space.
    pub(super) fn note(&self) -> Option<String> {
        self.policy.as_ref().map(|_| self.sandbox.denial_note(self.escalation_possible))
    }

    /// The note when a confined command looks denied.
    pub(super) fn denial_note(&self, exit: &Exit, output: &str) -> Option<String> {
        self.policy.as_ref()?;
        let (code, signal) = match exit {
            Exit::Code(code) if *code < 0 => (None, Some(-code)),
            Exit::Code(code) => (Some(*code), None),
            _ => return None,
        };
        crate::sandbox::looks_denied(code, signal, output).then(|| self.note()).flatten()
    }
}

/// Shell with the escalation parameters.
pub struct EscalatingShell(pub Shell);

impl TypedTool for EscalatingShell {
    type Params = EscalatableParams;
    const NAME: &'static str = "Shell";

    fn description(&self) -> String {
        self.0.description()
    }

    fn run<'a>(&'a self, params: EscalatableParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        let escalation = Escalation {
            wanted: params.sandbox_permissions == SandboxPermissions::RequireEscalated,
            justification: params.justification.unwrap_or_default(),
        };
        Box::pin(self.0.execute(params.shell, escalation, ctx))
    }
}

/// Shell as the session's tool: the description names the sandbox, and the escalation
/// parameters are offered in a sandboxed run that allows escalation.
pub fn into_tool(shell: Shell, env: &AgentEnv) -> Arc<dyn Tool> {
    let sandbox = env.sandbox.current();
    if !sandbox.is_on() {
        return Arc::new(Typed::new(shell));
    }
    let mut note = sandbox.describe(&env.work_dir, &[]);
    if sandbox.settings().allow_escalation {
        note.push_str(
            " When the sandbox blocks a command that must run, call Shell again with \"sandbox_permissions\": \
             \"require_escalated\" and a \"justification\": the user is asked to run that one command outside the \
             sandbox.",
        );
        Arc::new(Typed::new(EscalatingShell(shell.with_sandbox_note(Some(note)))))
    } else {
        Arc::new(Typed::new(shell.with_sandbox_note(Some(note))))
    }
}
