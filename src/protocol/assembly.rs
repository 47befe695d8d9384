//! Steps rebuilt from the core's fragments, by one rule for every reader: the session recorder
//! (`wire.jsonl`), the subagent wrapper, kimi's print projection and Claude's blocks.
//!
//! The core streams a step as fragments (`ContentPart`, `ToolCall`, `ToolCallPart`).
//! [`RunAssembler`] joins consecutive fragments of one thing into a [`Run`]: text onto text,
//! think onto a think whose signature has not arrived ([`ContentPart::extend`]), a call's
//! argument fragments onto the call. Media parts and tool calls always open a run of their own;
//! argument fragments with no call open (never sent by the core) form a run of their own too.
//! Any other event closes the open run, so runs come out in the order of the stream.
//! [`StepMessage`] folds a step's runs into its assistant message: content merged across the
//! calls in between, calls in order, orphan arguments dropped (as the core's own context does).
//!
//! Cost: a fragment that continues a run is appended (borrowed); a fragment is copied only when
//! it opens a run from a borrowed event, and moved when the caller owns it.

use serde::Serialize;

use super::content::ContentPart;
use super::event::Event;
use super::tool::{ToolCall, ToolCallPart};

/// Consecutive fragments of one thing, merged. Serializes as the event that stands for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "payload")]
pub enum Run {
    #[serde(rename = "ContentPart")]
    Content(ContentPart),
    #[serde(rename = "ToolCall")]
    Call(ToolCall),
    /// Argument fragments with no call to belong to.
    #[serde(rename = "ToolCallPart")]
    Arguments(ToolCallPart),
}

impl Run {
    /// The run as the one event that stands for it (the record `wire.jsonl` keeps).
    pub fn into_event(self) -> Event {
        match self {
            Run::Content(part) => Event::ContentPart(part),
            Run::Call(call) => Event::ToolCall(call),
            Run::Arguments(part) => Event::ToolCallPart(part),
        }
    }

    /// Appends `next` when it continues this run.
    fn extend(&mut self, next: Fragment<'_>) -> bool {
        match (self, next) {
            (Run::Content(part), Fragment::Content(more)) => part.extend(more),
            (Run::Call(call), Fragment::Arguments(more)) => {
                call.append_arguments(more.arguments_part.as_deref());
                true
            }
            (Run::Arguments(ToolCallPart { arguments_part: slot }), Fragment::Arguments(more)) => {
                if let Some(more) = &more.arguments_part {
                    slot.get_or_insert_with(String::new).push_str(more);
                }
                true
            }
            _ => false,
        }
    }

    fn as_fragment(&self) -> Fragment<'_> {
        match self {
            Run::Content(part) => Fragment::Content(part),
            Run::Call(call) => Fragment::Call(call),
            Run::Arguments(part) => Fragment::Arguments(part),
        }
    }
}

/// An owned event sorted for the assembler: a fragment (a run of one) or any other event.
#[derive(Debug)]
pub enum Sorted {
    Fragment(Run),
    Other(Event),
}

impl From<Event> for Sorted {
    /// Moves the event: nothing is copied.
    fn from(event: Event) -> Self {
        match event {
            Event::ContentPart(part) => Sorted::Fragment(Run::Content(part)),
            Event::ToolCall(call) => Sorted::Fragment(Run::Call(call)),
            Event::ToolCallPart(part) => Sorted::Fragment(Run::Arguments(part)),
            other => Sorted::Other(other),
        }
    }
}

/// A borrowed fragment.
#[derive(Clone, Copy)]
enum Fragment<'a> {
    Content(&'a ContentPart),
    Call(&'a ToolCall),
    Arguments(&'a ToolCallPart),
}

impl<'a> Fragment<'a> {
    fn of(event: &'a Event) -> Option<Self> {
        match event {
            Event::ContentPart(part) => Some(Fragment::Content(part)),
            Event::ToolCall(call) => Some(Fragment::Call(call)),
            Event::ToolCallPart(part) => Some(Fragment::Arguments(part)),
            _ => None,
        }
    }

    fn to_run(self) -> Run {
        match self {
            Fragment::Content(part) => Run::Content(part.clone()),
            Fragment::Call(call) => Run::Call(call.clone()),
            Fragment::Arguments(part) => Run::Arguments(part.clone()),
        }
    }
}

/// Whether the event is a fragment of a step (`ContentPart`, `ToolCall`, `ToolCallPart`).
pub fn is_fragment(event: &Event) -> bool {
    Fragment::of(event).is_some()
}

/// What one event did to the runs.
#[derive(Debug, PartialEq)]
pub enum Fed {
    /// A fragment that continued the open run.
    Continued,
    /// A fragment that opened a new run, closing the one before (if any).
    Opened(Option<Run>),
    /// Not a fragment: the open run (if any) is closed.
    Other(Option<Run>),
}

/// The run being merged.
#[derive(Debug, Default)]
pub struct RunAssembler {
    open: Option<Run>,
}

impl RunAssembler {
    /// Feeds an event the caller keeps (the fragment is copied only when it opens a run).
    pub fn push(&mut self, event: &Event) -> Fed {
        let Some(fragment) = Fragment::of(event) else { return Fed::Other(self.close()) };
        if let Some(open) = &mut self.open
            && open.extend(fragment)
        {
            return Fed::Continued;
        }
        Fed::Opened(self.open.replace(fragment.to_run()))
    }

    /// Feeds a fragment the caller owns ([`Sorted::Fragment`]; moved into the run when it opens one).
    pub fn push_run(&mut self, run: Run) -> Fed {
        if let Some(open) = &mut self.open
            && open.extend(run.as_fragment())
        {
            return Fed::Continued;
        }
        Fed::Opened(self.open.replace(run))
    }

    /// Closes the open run and returns it.
    pub fn close(&mut self) -> Option<Run> {
        self.open.take()
    }

    /// The run being merged.
    pub fn open(&self) -> Option<&Run> {
        self.open.as_ref()
    }
}

/// A step's assistant message, folded from its runs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StepMessage {
    pub content: Vec<ContentPart>,
    pub calls: Vec<ToolCall>,
}

impl StepMessage {
    /// Adds a closed run: content joins the content before it when they merge (a call in between
    /// does not part them, as in the message the model is sent back); a call is appended.
    pub fn add(&mut self, run: Run) {
        match run {
            Run::Content(part) => {
                if !self.content.last_mut().is_some_and(|last| last.extend(&part)) {
                    self.content.push(part);
                }
            }
            Run::Call(call) => self.calls.push(call),
            Run::Arguments(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Event {
        Event::ContentPart(ContentPart::text(t))
    }

    fn args(a: Option<&str>) -> Event {
        Event::ToolCallPart(ToolCallPart { arguments_part: a.map(str::to_string) })
    }

    /// Every event of `events` through one assembler; the closed runs, in order.
    fn runs(events: &[Event]) -> Vec<Run> {
        let (mut assembler, mut owned) = (RunAssembler::default(), RunAssembler::default());
        let mut out = Vec::new();
        for e in events {
            let fed = assembler.push(e);
            // The owned door follows the same rule.
            if let Sorted::Fragment(run) = Sorted::from(e.clone()) {
                assert_eq!(owned.push_run(run), fed);
                assert_eq!(owned.open, assembler.open);
            } else {
                owned.close();
            }
            match fed {
                Fed::Continued => {}
                Fed::Opened(closed) | Fed::Other(closed) => out.extend(closed),
            }
        }
        out.extend(assembler.close());
        out
    }

    #[test]
    fn text_and_think_runs_merge_until_the_kind_changes() {
        let signed = ContentPart::Think { think: "b".into(), encrypted: Some("sig".into()) };
        let out = runs(&[
            text("a"),
            text("b"),
            Event::ContentPart(ContentPart::think("a")),
            Event::ContentPart(signed),
            // The signature closed the think block.
            Event::ContentPart(ContentPart::think("c")),
            text("x"),
        ]);
        assert_eq!(
            out,
            [
                Run::Content(ContentPart::text("ab")),
                Run::Content(ContentPart::Think { think: "ab".into(), encrypted: Some("sig".into()) }),
                Run::Content(ContentPart::think("c")),
                Run::Content(ContentPart::text("x")),
            ]
        );
    }

    #[test]
    fn media_and_calls_stand_alone_and_calls_absorb_their_arguments() {
        let image = Event::ContentPart(ContentPart::ImageUrl { image_url: crate::protocol::MediaUrl::new("u") });
        let out = runs(&[
            image.clone(),
            image.clone(),
            Event::ToolCall(ToolCall::new("a", "T", Some("{".into()))),
            args(None),
            args(Some("}")),
            Event::ToolCall(ToolCall::new("b", "T", None)),
            args(Some("{}")),
        ]);
        assert_eq!(
            out,
            [
                Run::Content(ContentPart::ImageUrl { image_url: crate::protocol::MediaUrl::new("u") }),
                Run::Content(ContentPart::ImageUrl { image_url: crate::protocol::MediaUrl::new("u") }),
                Run::Call(ToolCall::new("a", "T", Some("{}".into()))),
                Run::Call(ToolCall::new("b", "T", Some("{}".into()))),
            ]
        );
    }

    #[test]
    fn orphan_arguments_form_their_own_run_and_other_events_close_runs() {
        let out = runs(&[
            text("a"),
            args(None),
            args(Some("x")),
            args(Some("y")),
            Event::TurnEnd {},
            text("b"),
            Event::StepInterrupted {},
            text("c"),
        ]);
        assert_eq!(
            out,
            [
                Run::Content(ContentPart::text("a")),
                Run::Arguments(ToolCallPart { arguments_part: Some("xy".into()) }),
                Run::Content(ContentPart::text("b")),
                Run::Content(ContentPart::text("c")),
            ]
        );
        assert!(matches!(Sorted::from(Event::TurnEnd {}), Sorted::Other(Event::TurnEnd {})));
        assert!(is_fragment(&args(None)) && !is_fragment(&Event::TurnEnd {}));
    }

    #[test]
    fn a_run_serializes_as_its_event() {
        for run in [
            Run::Content(ContentPart::text("a")),
            Run::Call(ToolCall::new("a", "T", Some("{}".into()))),
            Run::Arguments(ToolCallPart { arguments_part: None }),
        ] {
            let json = serde_json::to_string(&run).unwrap();
            assert_eq!(json, serde_json::to_string(&run.into_event()).unwrap());
        }
    }

    #[test]
    fn a_step_message_merges_content_across_calls_and_drops_orphan_arguments() {
        let mut message = StepMessage::default();
        for run in
            runs(&[text("Let me "), Event::ToolCall(ToolCall::new("a", "T", None)), text("check."), args(Some("lost"))])
        {
            message.add(run);
        }
        assert_eq!(message.content, [ContentPart::text("Let me check.")]);
        assert_eq!(message.calls, [ToolCall::new("a", "T", None)]);
    }
}
