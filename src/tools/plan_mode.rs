//! `EnterPlanMode` and `ExitPlanMode` (`docs/protocol-1.10.md` §6.4): the model proposes plan mode, and
//! presents its plan for approval, through the host.
//!
//! Invariants: nothing is switched without the user's yes, unless nobody needs asking (yolo or
//! afk to enter, afk to approve a plan); the plan is shown (`PlanDisplay`) before the question
//! that approves it; a client that cannot show questions gets nothing and the model an error;
//! rejecting a plan is a user rejection (it ends the turn), revising it is not.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{QuestionOutcome, ToolCallContext, TypedTool, invalid_arguments};
use crate::protocol::{
    DisplayBlock, ErrorCause, QuestionItem, QuestionOption, ToolReturnValue, tool::REJECTED_MESSAGE,
};

pub const UNSUPPORTED: &str = "The connected client does not support plan mode. Do NOT call this tool again.";

fn with_brief(result: ToolReturnValue, brief: &str) -> ToolReturnValue {
    result.with_display(vec![DisplayBlock::brief(brief)])
}

fn option(label: &str, description: &str) -> QuestionOption {
    QuestionOption { label: label.into(), description: description.into() }
}

/// The single answer of a one-question request, if any.
fn single_answer(outcome: &QuestionOutcome, question: &str) -> Option<String> {
    match outcome {
        QuestionOutcome::Answered(answers) => {
            let value = answers.get(question).or_else(|| answers.values().next())?;
            Some(value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string()))
        }
        _ => None,
    }
}

pub struct EnterPlanMode;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnterPlanModeParams {}

const ENTER_QUESTION: &str = "Enter plan mode?";

impl TypedTool for EnterPlanMode {
    type Params = EnterPlanModeParams;
    const NAME: &'static str = "EnterPlanMode";

    fn description(&self) -> String {
        include_str!("desc/enter_plan_mode.md").trim().to_string()
    }

    fn run<'a>(&'a self, _: EnterPlanModeParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let host = &ctx.host;
            if host.plan_mode().active {
                return ToolReturnValue::error(
                    "Already in plan mode. Use ExitPlanMode when your plan is ready.",
                    "Already in plan mode",
                );
            }
            let presence = host.presence();
            if presence.yolo || presence.afk {
                let view = host.switch_plan_mode(true);
                return with_brief(
                    ToolReturnValue::ok(entered(view.file.as_deref()), "Plan mode on (auto)"),
                    "Plan mode on (auto)",
                );
            }
            if !host.can_ask_user() {
                return ToolReturnValue::error(UNSUPPORTED, "Client unsupported");
            }
            let question = QuestionItem::new(
                ENTER_QUESTION,
                "Plan Mode",
                vec![
                    option("Yes", "Investigate and write a plan first; no changes until it is approved."),
                    option("No", "Go ahead without a plan."),
                ],
            );
            let outcome = host.ask_user(&ctx.tool_call_id, vec![question]).await;
            match (&outcome, single_answer(&outcome, ENTER_QUESTION).as_deref()) {
                (QuestionOutcome::Unsupported, _) => ToolReturnValue::error(UNSUPPORTED, "Client unsupported"),
                (_, Some("Yes")) => {
                    let view = host.switch_plan_mode(true);
                    with_brief(ToolReturnValue::ok(entered(view.file.as_deref()), "Plan mode on"), "Plan mode on")
                }
                (QuestionOutcome::Dismissed, _) => with_brief(
                    ToolReturnValue::ok("The user dismissed the question; plan mode stays off.", "Dismissed"),
                    "Dismissed",
                ),
                _ => with_brief(
                    ToolReturnValue::ok("The user declined plan mode; continue without it.", "Declined"),
                    "Declined",
                ),
            }
        })
    }
}

fn entered(file: Option<&std::path::Path>) -> String {
    let file = file.map(|f| f.display().to_string()).unwrap_or_default();
    format!(
        "Plan mode is on. Investigate, then write your plan to the plan file: {file}\n\
         Only the plan file may be written while plan mode is on. Call ExitPlanMode when the plan is ready."
    )
}

pub struct ExitPlanMode;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanOption {
    /// A short name for the approach.
    pub label: String,
    /// What the approach does differently.
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExitPlanModeParams {
    /// Up to three alternative approaches for the user to choose from (optional).
    #[serde(default)]
    #[schemars(length(max = 3))]
    pub options: Option<Vec<PlanOption>>,
}

const APPROVE_QUESTION: &str = "Approve this plan";
const RESERVED_LABELS: [&str; 4] = ["reject", "revise", "approve", "reject and exit"];

fn check_options(options: &[PlanOption]) -> Result<(), String> {
    if options.len() > 3 {
        return Err(format!("options must hold at most 3 items, got {}", options.len()));
    }
    for (i, o) in options.iter().enumerate() {
        if RESERVED_LABELS.contains(&o.label.to_lowercase().as_str()) {
            return Err(format!("options[{i}].label `{}` is reserved", o.label));
        }
        if options[..i].iter().any(|p| p.label == o.label) {
            return Err(format!("options[{i}].label `{}` is not unique", o.label));
        }
    }
    Ok(())
}

impl TypedTool for ExitPlanMode {
    type Params = ExitPlanModeParams;
    const NAME: &'static str = "ExitPlanMode";

    fn description(&self) -> String {
        include_str!("desc/exit_plan_mode.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: ExitPlanModeParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let options = params.options.unwrap_or_default();
            if let Err(e) = check_options(&options) {
                return invalid_arguments(format!("Error validating JSON arguments: {e}"));
            }
            let host = &ctx.host;
            let view = host.plan_mode();
            let (true, Some(file)) = (view.active, view.file) else {
                return ToolReturnValue::error(
                    "Not in plan mode. ExitPlanMode is only available during plan mode.",
                    "Not in plan mode",
                );
            };
            let plan = std::fs::read_to_string(&file).unwrap_or_default();
            if plan.trim().is_empty() {
                return ToolReturnValue::error(
                    format!("No plan file found. Write your plan to {} first, then call ExitPlanMode.", file.display()),
                    "No plan file",
                );
            }
            if host.presence().afk {
                host.switch_plan_mode(false);
                return with_brief(
                    ToolReturnValue::ok(approved_output(&plan, None), "Plan approved (auto)"),
                    "Plan approved (auto)",
                );
            }
            if !host.can_ask_user() {
                return ToolReturnValue::error(UNSUPPORTED, "Client unsupported");
            }
            host.show_plan(plan.clone(), file.display().to_string()).await;
            let mut choices: Vec<QuestionOption> = if options.len() >= 2 {
                options.iter().map(|o| option(&o.label, &o.description)).collect()
            } else {
                vec![option("Approve", "Leave plan mode and carry out the plan.")]
            };
            choices.push(option("Reject", "Do not carry out this plan; stay in plan mode."));
            choices.push(option("Reject and Exit", "Do not carry out this plan and leave plan mode."));
            let question = QuestionItem {
                other_label: "Revise".into(),
                other_description: "Say what to change in the plan.".into(),
                ..QuestionItem::new(APPROVE_QUESTION, "Plan", choices)
            };
            let outcome = host.ask_user(&ctx.tool_call_id, vec![question]).await;
            let answer = single_answer(&outcome, APPROVE_QUESTION);
            let approves = |label: &str| {
                if options.len() >= 2 { options.iter().any(|o| o.label == label) } else { label == "Approve" }
            };
            match (&outcome, answer.as_deref()) {
                (QuestionOutcome::Unsupported, _) => ToolReturnValue::error(UNSUPPORTED, "Client unsupported"),
                (QuestionOutcome::Dismissed, _) | (_, None) => with_brief(
                    ToolReturnValue::ok("The user dismissed the plan; plan mode stays on.", "Dismissed"),
                    "Dismissed",
                ),
                (_, Some("Reject and Exit")) => {
                    host.switch_plan_mode(false);
                    rejection("Plan rejected, exited plan mode")
                }
                (_, Some("Reject")) => rejection("Plan rejected"),
                (_, Some(label)) if approves(label) => {
                    host.switch_plan_mode(false);
                    let message =
                        if options.len() >= 2 { format!("Plan approved: {label}") } else { "Plan approved".into() };
                    let chosen = (options.len() >= 2).then_some(label);
                    with_brief(ToolReturnValue::ok(approved_output(&plan, chosen), message.clone()), &message)
                }
                (_, Some(feedback)) => with_brief(
                    ToolReturnValue::ok(
                        format!(
                            "The user wants the plan revised. Their feedback:\n{feedback}\n\nUpdate the plan file, then call ExitPlanMode again."
                        ),
                        "Plan revision requested",
                    ),
                    "Plan revision requested",
                ),
            }
        })
    }
}

fn approved_output(plan: &str, chosen: Option<&str>) -> String {
    let choice = chosen.map(|c| format!("The user chose: {c}\n")).unwrap_or_default();
    format!("The user approved the plan. Plan mode is off; carry it out now.\n{choice}\n{plan}")
}

/// A rejected plan ends the turn like a rejected tool call.
fn rejection(brief: &str) -> ToolReturnValue {
    ToolReturnValue { cause: ErrorCause::Rejected, ..ToolReturnValue::error(REJECTED_MESSAGE, brief) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(label: &str) -> PlanOption {
        PlanOption { label: label.into(), description: String::new() }
    }

    #[test]
    fn option_labels_are_checked() {
        assert!(check_options(&[opt("Fast"), opt("Safe")]).is_ok());
        assert!(check_options(&[opt("Fast"), opt("fast ")]).is_ok(), "only exact duplicates");
        assert!(check_options(&[opt("Fast"), opt("Fast")]).is_err());
        assert!(check_options(&[opt("APPROVE")]).is_err());
        assert!(check_options(&[opt("reject and exit")]).is_err());
        assert!(check_options(&[opt("a"), opt("b"), opt("c"), opt("d")]).is_err());
    }

    #[test]
    fn rejections_end_the_turn() {
        assert_eq!(rejection("Plan rejected").kind(), crate::protocol::ResultKind::Rejected);
    }
}
