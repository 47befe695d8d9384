//! `AskUserQuestion` through the editor (`docs/acp.md` §5.6): an `elicitation/create` form when
//! the client offered `elicitation.form`; otherwise each single-choice question as a
//! `session/request_permission` card with one option per answer; otherwise (a multi-select
//! question and no form) nothing is asked and the model hears that nobody could answer.
//!
//! Invariants:
//! * the answers map each question's text to the chosen label (several labels joined with `, `),
//!   the shape the wire's question answers have;
//! * a decline, a cancel, a "dismiss" option, an unreadable answer or an error answer dismisses
//!   the whole set (already answered questions of the set are dropped with it);
//! * an error answer to `elicitation/create` (a client that advertised forms but refuses this
//!   one) falls back to permission cards when every question is single-choice;
//! * the caller stops waiting when the turn is cancelled: the pending request is forgotten and
//!   the client's late answer finds nobody.

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction, ElicitationContentValue,
    ElicitationFormMode, ElicitationSchema, ElicitationSessionScope, EnumOption, MultiSelectPropertySchema,
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, StringPropertySchema, ToolCallId, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::{Map, Value};

use super::client_calls::ClientCalls;
use super::mapping::text_content;
use super::permission;
use crate::protocol::QuestionItem;
use crate::soul::ClientAnswer;

pub const ELICITATION_METHOD: &str = "elicitation/create";
/// The option that dismisses a question card.
pub const DISMISS: &str = "dismiss";
/// What the model hears when a multi-select question meets an editor without forms.
pub const NO_MULTI_SELECT: &str = "This editor can show single-choice questions only (it offers no \
     elicitation form); a multi-select question cannot be answered here. Ask the user directly in \
     your text response instead, or ask single-choice questions.";

/// Asks `questions` for the tool call `tool_call_id` (the ACP id) of `session_id`.
pub async fn ask(
    calls: &ClientCalls,
    session_id: &str,
    tool_call_id: &str,
    questions: &[QuestionItem],
    elicitation: bool,
) -> ClientAnswer {
    if elicitation {
        let request = form_request(session_id, tool_call_id, questions);
        match calls.call::<_, CreateElicitationResponse>(ELICITATION_METHOD, &request).await {
            Ok(response) => return form_answers(questions, response),
            Err(e) => tracing::info!("the client did not take the question form ({e}); trying permission cards"),
        }
    }
    if questions.iter().any(|q| q.multi_select) {
        return ClientAnswer::QuestionsUnanswerable(NO_MULTI_SELECT.to_string());
    }
    let mut answers = Map::new();
    for question in questions {
        let request = card(session_id, tool_call_id, question);
        let response = calls.call::<_, RequestPermissionResponse>(permission::METHOD, &request).await;
        let chosen = match response {
            Ok(response) => chosen_label(question, response),
            Err(e) => {
                tracing::info!("the client answered a question card with an error: {e}");
                None
            }
        };
        let Some(label) = chosen else { return ClientAnswer::Questions(None) };
        answers.insert(question.question.clone(), Value::from(label));
    }
    ClientAnswer::Questions(Some(answers))
}

/// The form's property for question `i`.
fn property_name(i: usize) -> String {
    format!("question_{}", i + 1)
}

fn options_of(question: &QuestionItem) -> Vec<EnumOption> {
    question
        .options
        .iter()
        .map(|o| {
            let option = EnumOption::new(o.label.clone(), o.label.clone());
            if o.description.is_empty() { option } else { option.description(o.description.clone()) }
        })
        .collect()
}

/// One form with a required property per question: a titled single choice, or a titled
/// multi-select needing at least one choice.
pub fn form_request(session_id: &str, tool_call_id: &str, questions: &[QuestionItem]) -> CreateElicitationRequest {
    let mut schema = ElicitationSchema::new();
    for (i, question) in questions.iter().enumerate() {
        let title = (!question.header.is_empty()).then(|| question.header.clone());
        schema = if question.multi_select {
            let property = MultiSelectPropertySchema::titled(options_of(question))
                .title(title)
                .description(question.question.clone())
                .min_items(1);
            schema.property(property_name(i), property, true)
        } else {
            let mut property = StringPropertySchema::new();
            property.title = title;
            property.description = Some(question.question.clone());
            property.one_of = Some(options_of(question));
            schema.property(property_name(i), property, true)
        };
    }
    let message = match questions {
        [one] => one.question.clone(),
        many => format!("Please answer these {} questions.", many.len()),
    };
    let scope =
        ElicitationSessionScope::new(session_id.to_string()).tool_call_id(ToolCallId::new(tool_call_id.to_string()));
    CreateElicitationRequest::new(ElicitationFormMode::new(scope, schema), message)
}

/// The form's answer as question text → label(s); anything but an accepted form that answers
/// every question dismisses.
pub fn form_answers(questions: &[QuestionItem], response: CreateElicitationResponse) -> ClientAnswer {
    let ElicitationAction::Accept(accepted) = response.action else { return ClientAnswer::Questions(None) };
    let content: BTreeMap<String, ElicitationContentValue> = accepted.content.unwrap_or_default();
    let mut answers = Map::new();
    for (i, question) in questions.iter().enumerate() {
        let answer = match content.get(&property_name(i)) {
            Some(ElicitationContentValue::String(label)) if !label.is_empty() => label.clone(),
            Some(ElicitationContentValue::StringArray(labels)) if !labels.is_empty() => labels.join(", "),
            _ => {
                tracing::info!("the question form came back without an answer to {:?}; dismissed", question.question);
                return ClientAnswer::Questions(None);
            }
        };
        answers.insert(question.question.clone(), Value::from(answer));
    }
    ClientAnswer::Questions(Some(answers))
}

/// A permission card for one single-choice question: an option per answer, then "Dismiss".
pub fn card(session_id: &str, tool_call_id: &str, question: &QuestionItem) -> RequestPermissionRequest {
    let mut text = question.question.clone();
    for option in question.options.iter().filter(|o| !o.description.is_empty()) {
        text.push_str(&format!("\n- {}: {}", option.label, option.description));
    }
    let title = if question.header.is_empty() { question.question.clone() } else { question.header.clone() };
    let fields = ToolCallUpdateFields::new().title(title).content(vec![text_content(text)]);
    let mut options: Vec<PermissionOption> = question
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            PermissionOption::new(format!("answer_{}", i + 1), o.label.clone(), PermissionOptionKind::AllowOnce)
        })
        .collect();
    options.push(PermissionOption::new(DISMISS, "Dismiss", PermissionOptionKind::RejectOnce));
    RequestPermissionRequest::new(
        session_id.to_string(),
        ToolCallUpdate::new(tool_call_id.to_string(), fields),
        options,
    )
}

/// The label the card's answer chose; `None` for a dismissal, a cancel or an unknown option.
fn chosen_label(question: &QuestionItem, response: RequestPermissionResponse) -> Option<String> {
    let RequestPermissionOutcome::Selected(selected) = response.outcome else { return None };
    let index: usize = selected.option_id.0.strip_prefix("answer_")?.parse().ok()?;
    question.options.get(index.checked_sub(1)?).map(|o| o.label.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::QuestionOption;
    use serde_json::json;

    fn question(text: &str, labels: &[&str], multi: bool) -> QuestionItem {
        let options =
            labels.iter().map(|l| QuestionOption { label: l.to_string(), description: format!("about {l}") }).collect();
        QuestionItem { multi_select: multi, ..QuestionItem::new(text, "Hdr", options) }
    }

    #[test]
    fn the_form_has_one_required_property_per_question() {
        let qs = [question("Which db?", &["pg", "sqlite"], false), question("Which tests?", &["unit", "e2e"], true)];
        let request = form_request("s1", "call/1", &qs);
        assert_eq!(
            serde_json::to_value(request).unwrap(),
            json!({"mode": "form", "sessionId": "s1", "toolCallId": "call/1",
                "requestedSchema": {"type": "object", "properties": {
                    "question_1": {"type": "string", "title": "Hdr", "description": "Which db?", "oneOf": [
                        {"const": "pg", "title": "pg", "description": "about pg"},
                        {"const": "sqlite", "title": "sqlite", "description": "about sqlite"}]},
                    "question_2": {"type": "array", "title": "Hdr", "description": "Which tests?", "minItems": 1,
                        "items": {"anyOf": [
                            {"const": "unit", "title": "unit", "description": "about unit"},
                            {"const": "e2e", "title": "e2e", "description": "about e2e"}]}}},
                    "required": ["question_1", "question_2"]},
                "message": "Please answer these 2 questions."})
        );
    }

    #[test]
    fn form_answers_become_labels_and_anything_else_dismisses() {
        let qs = [question("Which db?", &["pg", "sqlite"], false), question("Which tests?", &["unit", "e2e"], true)];
        let response = |v: Value| serde_json::from_value::<CreateElicitationResponse>(v).unwrap();
        let accepted =
            response(json!({"action": "accept", "content": {"question_1": "sqlite", "question_2": ["unit", "e2e"]}}));
        let mut expected = Map::new();
        expected.insert("Which db?".into(), Value::from("sqlite"));
        expected.insert("Which tests?".into(), Value::from("unit, e2e"));
        assert_eq!(form_answers(&qs, accepted), ClientAnswer::Questions(Some(expected)));
        for other in [
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
            json!({"action": "accept", "content": {"question_1": "pg"}}),
            json!({"action": "accept", "content": {"question_1": "pg", "question_2": []}}),
            json!({"action": "accept"}),
        ] {
            assert_eq!(form_answers(&qs, response(other.clone())), ClientAnswer::Questions(None), "{other}");
        }
    }

    #[test]
    fn a_card_offers_each_answer_then_dismiss() {
        let q = question("Which db?", &["pg", "sqlite"], false);
        let request = card("s1", "call/1", &q);
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"sessionId": "s1", "toolCall": {"toolCallId": "call/1", "title": "Hdr",
                    "content": [{"type": "content", "content": {"type": "text",
                        "text": "Which db?\n- pg: about pg\n- sqlite: about sqlite"}}]},
                "options": [
                    {"optionId": "answer_1", "name": "pg", "kind": "allow_once"},
                    {"optionId": "answer_2", "name": "sqlite", "kind": "allow_once"},
                    {"optionId": "dismiss", "name": "Dismiss", "kind": "reject_once"}]})
        );
        let answer = |v: Value| chosen_label(&q, serde_json::from_value(json!({"outcome": v})).unwrap());
        assert_eq!(answer(json!({"outcome": "selected", "optionId": "answer_2"})).as_deref(), Some("sqlite"));
        assert_eq!(answer(json!({"outcome": "selected", "optionId": "dismiss"})), None);
        assert_eq!(answer(json!({"outcome": "selected", "optionId": "answer_0"})), None);
        assert_eq!(answer(json!({"outcome": "selected", "optionId": "answer_3"})), None);
        assert_eq!(answer(json!({"outcome": "cancelled"})), None);
    }
}
