//! `POST /api/sessions/{id}/generate-title` (`docs/web-api.md` §2.1): a short title from the
//! first exchange, by one call to the default model, with a fallback from the prompt's text.
//!
//! Invariants: the model is a provider instance of its own, built from the default config for
//! this call (a session's provider, and with it the scripted test provider's script queue, is
//! never touched); at most 3 failed attempts per session, then the fallback is kept; a title set
//! meanwhile (a rename) wins over the generated one.

use std::path::Path;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Value, json};

use super::super::errors::ApiError;
use super::super::openapi::{Detail, Invalid, TitleAnswer, TitleRequest};
use super::super::state::AppState;
use super::common::{self, blocking, not_busy, session};
use crate::llm::{ChatRequest, Message, StreamEvent};
use crate::protocol::ContentPart;
use crate::session::{catalog, state};

const MAX_TITLE: usize = 50;
const MAX_ATTEMPTS: u32 = 3;
const SYSTEM_PROMPT: &str = "You name conversations. Reply with a title of at most 50 characters that says what the \
conversation is about, in the language of the conversation. Reply with the title only: no quotes, no punctuation at \
the end, nothing else.";

/// The first exchange of a `wire.jsonl`: the first prompt's text and the top-level text the
/// assistant wrote before the first `TurnEnd`.
fn first_exchange(wire: &Path) -> (String, String) {
    use std::io::BufRead as _;
    let Ok(file) = std::fs::File::open(wire) else { return (String::new(), String::new()) };
    let mut user: Option<String> = None;
    let mut assistant = String::new();
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(record) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(message) = record.get("message") else { continue };
        match message.get("type").and_then(Value::as_str) {
            Some("TurnBegin") if user.is_none() => {
                user = Some(message.pointer("/payload/user_input").map(catalog::user_input_text).unwrap_or_default());
            }
            Some("ContentPart")
                if user.is_some() && message.pointer("/payload/type").and_then(Value::as_str) == Some("text") =>
            {
                assistant.push_str(message.pointer("/payload/text").and_then(Value::as_str).unwrap_or_default());
            }
            Some("TurnEnd") if user.is_some() => break,
            _ => {}
        }
    }
    (user.unwrap_or_default(), assistant)
}

fn head(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

/// The model's answer trimmed, surrounding quotes removed, shortened to 50.
fn clean(reply: &str) -> String {
    let t = reply.trim().trim_matches(|c| c == '"' || c == '\'').trim();
    catalog::shorten(t, MAX_TITLE)
}

/// One call to the default model; `None` when it fails or says nothing.
async fn ask_model(config: &Path, model: Option<&str>, user: &str, assistant: &str) -> Option<String> {
    let config = crate::config::load_file(config).ok()?;
    let settings = crate::config::select(&config, model, Some(false), &crate::config::select::ProcessEnv).ok()?;
    let provider = crate::llm::build::build_provider(&settings, &uuid::Uuid::new_v4().to_string(), None).ok()??;
    let prompt = format!("User: {}\nAssistant: {}\n\nTitle:", head(user, 300), head(assistant, 300));
    let history = [Message::user_text(prompt)];
    let request = ChatRequest { system_prompt: SYSTEM_PROMPT, tools: &[], history: &history };
    let mut stream = match provider.stream(request).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("generate-title: {e}");
            return None;
        }
    };
    let mut text = String::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamEvent::Content(ContentPart::Text { text: t })) => text.push_str(&t),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("generate-title: {e}");
                return None;
            }
        }
    }
    let title = clean(&text);
    (!title.is_empty()).then_some(title)
}

/// `POST /api/sessions/{id}/generate-title` (`docs/web-api.md` §2.1).
#[utoipa::path(post, path = "/api/sessions/{session_id}/generate-title", tag = "sessions", params(("session_id" = String, Path, description = "The session's UUID (not a UUID → 422).")),
    request_body(content = Option<TitleRequest>, content_type = "application/json"),
    responses((status = 200, description = "The title (stored as `custom_title`).", body = TitleAnswer),
        (status = 400, description = "Session is busy. Please wait for it to complete before modifying.", body = Detail), (status = 404, description = "Session not found.", body = Detail), (status = 422, description = "Invalid input.", body = Invalid)))]
pub async fn generate(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let info = session(&state, &id).await?;
    let body: Value = common::optional_body(&bytes)?;
    let sent_user = common::string_field(body.get("user_message"), &["body", "user_message"])?.unwrap_or_default();
    let sent_assistant =
        common::string_field(body.get("assistant_response"), &["body", "assistant_response"])?.unwrap_or_default();
    not_busy(&state, &info.id)?;
    let dir = info.session_dir.clone();
    let saved = blocking({
        let dir = dir.clone();
        move || state::load(&dir)
    })
    .await?;
    let answer = |t: String| axum::Json(json!({"title": t})).into_response();
    if saved.title_generated {
        return Ok(answer(saved.custom_title.unwrap_or_else(|| "Untitled".into())));
    }
    let (user, assistant) = if !sent_user.trim().is_empty() && !sent_assistant.trim().is_empty() {
        (sent_user, sent_assistant)
    } else {
        let wire = dir.join("wire.jsonl");
        blocking(move || first_exchange(&wire)).await?
    };
    if user.trim().is_empty() {
        return Ok(answer("Untitled".into()));
    }
    let fallback = catalog::shorten(&user, MAX_TITLE);
    let fallback = if fallback.is_empty() { "Untitled".to_string() } else { fallback };
    let generated = if saved.title_generate_attempts >= MAX_ATTEMPTS {
        None
    } else {
        ask_model(&state.config_path(), state.model_choice().as_deref(), &user, &assistant).await
    };
    let exhausted = saved.title_generate_attempts >= MAX_ATTEMPTS;
    let title = blocking(move || {
        state::update_file(&dir, |s| {
            if s.title_generated {
                return s.custom_title.clone().unwrap_or_else(|| "Untitled".into());
            }
            match generated {
                Some(t) => {
                    s.custom_title = Some(t.clone());
                    s.title_generated = true;
                    t
                }
                None if exhausted => {
                    s.custom_title = Some(fallback.clone());
                    s.title_generated = true;
                    fallback
                }
                None => {
                    s.custom_title = Some(fallback.clone());
                    s.title_generate_attempts += 1;
                    fallback
                }
            }
        })
    })
    .await?
    .map_err(|e| ApiError::internal(format!("Failed to save the title: {e}")))?;
    Ok(answer(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_exchange_and_cleaning() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("wire.jsonl");
        std::fs::write(
            &wire,
            [
                r#"{"type":"metadata","protocol_version":"1.10"}"#,
                r#"{"timestamp":1,"message":{"type":"TurnBegin","payload":{"user_input":"fix  the tests"}}}"#,
                r#"{"timestamp":2,"message":{"type":"ContentPart","payload":{"type":"think","think":"hmm"}}}"#,
                r#"{"timestamp":3,"message":{"type":"ContentPart","payload":{"type":"text","text":"Done"}}}"#,
                r#"{"timestamp":4,"message":{"type":"ContentPart","payload":{"type":"text","text":" now."}}}"#,
                r#"{"timestamp":5,"message":{"type":"TurnEnd","payload":{}}}"#,
                r#"{"timestamp":6,"message":{"type":"ContentPart","payload":{"type":"text","text":"later"}}}"#,
            ]
            .join("\n"),
        )
        .unwrap();
        assert_eq!(first_exchange(&wire), ("fix  the tests".to_string(), "Done now.".to_string()));
        assert_eq!(first_exchange(&dir.path().join("none")), (String::new(), String::new()));
        assert_eq!(clean("  \"Fixing tests\"\n"), "Fixing tests");
        assert!(clean(&"word ".repeat(30)).chars().count() <= 50);
    }
}
