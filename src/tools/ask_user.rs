//! `AskUserQuestion` (`docs/protocol-1.10.md` §7): multiple-choice questions to the user, through the host.
//!
//! Invariants: the arguments are checked before anything is asked (1–4 questions, 2–4 options
//! each); nobody present (afk), a dismissal, or questions the client cannot show (an ACP editor
//! without elicitation and a multi-select question, `docs/acp.md`) are ordinary results with a
//! note the model can act on, never errors; a client that cannot show questions at all gets
//! nothing sent and the model an error telling it to ask in text instead. Needs no approval.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{QuestionOutcome, ToolCallContext, TypedTool, invalid_arguments};
use crate::protocol::{DisplayBlock, QuestionItem, QuestionOption, ToolReturnValue};
use crate::session::pyjson;

pub struct AskUserQuestion;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OptionParam {
    /// The choice as the user sees it (1-5 words).
    pub label: String,
    /// What choosing it means.
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QuestionParam {
    /// The complete question.
    pub question: String,
    /// A very short label for the question (a few words).
    #[serde(default)]
    pub header: String,
    /// Two to four choices.
    #[schemars(length(min = 2, max = 4))]
    pub options: Vec<OptionParam>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multi_select: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskUserQuestionParams {
    /// One to four questions.
    #[schemars(length(min = 1, max = 4))]
    pub questions: Vec<QuestionParam>,
}

/// The tool's output: what the user answered, plus a note when nobody did.
#[derive(Serialize)]
struct Answers<'a> {
    answers: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

pub const UNSUPPORTED: &str = "The connected client does not support interactive questions. Do NOT call this tool again. Ask the user directly in your text response instead.";
const AFK_NOTE: &str = "Running in afk mode. No user is present. Make your own decision.";
const DISMISSED: &str = "User dismissed the question without answering.";
/// The start of the note when the client could not show the questions at all.
const NOBODY_COULD_ANSWER: &str = "Nobody could answer: the questions were not shown to the user.";

/// `{"answers": …}` with Python's separators and non-ASCII kept.
fn answers_json(answers: &Map<String, Value>, note: Option<&str>) -> String {
    match pyjson::to_line(&Answers { answers, note }) {
        Ok(mut line) => {
            line.pop();
            String::from_utf8(line).unwrap_or_default()
        }
        Err(_) => String::from("{\"answers\": {}}"),
    }
}

fn check(params: &AskUserQuestionParams) -> Result<(), String> {
    if !(1..=4).contains(&params.questions.len()) {
        return Err(format!("questions must hold 1 to 4 items, got {}", params.questions.len()));
    }
    for (i, q) in params.questions.iter().enumerate() {
        if !(2..=4).contains(&q.options.len()) {
            return Err(format!("questions[{i}].options must hold 2 to 4 items, got {}", q.options.len()));
        }
    }
    Ok(())
}

impl TypedTool for AskUserQuestion {
    type Params = AskUserQuestionParams;
    const NAME: &'static str = "AskUserQuestion";

    fn description(&self) -> String {
        include_str!("desc/ask_user_question.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: AskUserQuestionParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Err(e) = check(&params) {
                return invalid_arguments(format!("Error validating JSON arguments: {e}"));
            }
            if ctx.host.presence().afk {
                return ToolReturnValue::ok(answers_json(&Map::new(), Some(AFK_NOTE)), "Afk mode, auto-dismissed.")
                    .with_display(vec![DisplayBlock::brief("Auto-dismissed (afk)")]);
            }
            let questions = params
                .questions
                .into_iter()
                .map(|q| QuestionItem {
                    multi_select: q.multi_select,
                    ..QuestionItem::new(
                        q.question,
                        q.header,
                        q.options
                            .into_iter()
                            .map(|o| QuestionOption { label: o.label, description: o.description })
                            .collect(),
                    )
                })
                .collect();
            match ctx.host.ask_user(&ctx.tool_call_id, questions).await {
                QuestionOutcome::Answered(answers) => {
                    ToolReturnValue::ok(answers_json(&answers, None), "User has answered.")
                        .with_display(vec![DisplayBlock::brief("User answered")])
                }
                QuestionOutcome::Dismissed => {
                    ToolReturnValue::ok(answers_json(&Map::new(), Some(DISMISSED)), DISMISSED)
                        .with_display(vec![DisplayBlock::brief("User dismissed")])
                }
                QuestionOutcome::Unsupported => ToolReturnValue::error(UNSUPPORTED, "Client unsupported"),
                QuestionOutcome::Unanswerable(reason) => {
                    let note = format!("{NOBODY_COULD_ANSWER} {reason}");
                    ToolReturnValue::ok(answers_json(&Map::new(), Some(&note)), "Nobody could answer.")
                        .with_display(vec![DisplayBlock::brief("Not asked: the client cannot show these questions")])
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_use_python_separators_and_keep_non_ascii() {
        let mut answers = Map::new();
        answers.insert("Which?".into(), Value::from("Größe"));
        assert_eq!(answers_json(&answers, None), r#"{"answers": {"Which?": "Größe"}}"#);
        assert_eq!(
            answers_json(&Map::new(), Some(AFK_NOTE)),
            r#"{"answers": {}, "note": "Running in afk mode. No user is present. Make your own decision."}"#
        );
    }

    #[test]
    fn counts_are_checked() {
        let q = |n: usize| QuestionParam {
            question: "q".into(),
            header: String::new(),
            options: (0..n).map(|i| OptionParam { label: i.to_string(), description: String::new() }).collect(),
            multi_select: false,
        };
        assert!(check(&AskUserQuestionParams { questions: vec![q(2)] }).is_ok());
        assert!(check(&AskUserQuestionParams { questions: vec![q(1)] }).is_err());
        assert!(check(&AskUserQuestionParams { questions: vec![q(5)] }).is_err());
        assert!(check(&AskUserQuestionParams { questions: vec![] }).is_err());
        assert!(check(&AskUserQuestionParams { questions: (0..5).map(|_| q(2)).collect() }).is_err());
    }
}
