//! The shared Server-Sent-Events layer: an incremental parser and the stream that feeds parsed
//! events to a per-provider [`ChunkMapper`].
//!
//! Invariants:
//! * any split of the input bytes yields the same events (lines may end in LF, CRLF or CR; a CR
//!   at the end of a read waits for the next read before it is judged);
//! * `data:` with or without the space, multi-line data joined by `\n`, `:` comments and unknown
//!   fields ignored, `event:` names passed to the mapper;
//! * at end of body, a pending event without its blank line is still dispatched (the reference
//!   does too, so a torn last JSON surfaces as an error rather than vanishing);
//! * events produced by one network read are all delivered before an error or the end marker
//!   found in that same read takes effect;
//! * a body that breaks off (incomplete chunked read) is an error, never a silent success;
//! * each byte is scanned for a line end once, however a line is split across reads, and an event
//!   (its unfinished line plus the data gathered) larger than [`MAX_EVENT_BYTES`] ends the stream
//!   with a provider error naming the limit, so a line that never ends costs
//!   neither unbounded memory nor a core.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;

use super::http;
use crate::llm::{ChatError, StreamEvent};

/// The largest event a provider stream may send: its unfinished line plus the data gathered
/// (a whole `response.completed` with a long answer fits many times over).
pub const MAX_EVENT_BYTES: usize = 64 << 20;

/// One dispatched SSE event. `event` is `""` when the event had no `event:` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    pub event: &'a str,
    pub data: &'a str,
}

/// Incremental SSE parser: feed it bytes as they arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an incomplete line carried over from the previous read.
    partial: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    has_event: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk`, calling `on_event` for each complete event. Stops early (returning the
    /// error) if the callback fails.
    pub fn feed<E>(&mut self, chunk: &[u8], mut on_event: impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<(), E> {
        let mut rest = chunk;
        if !self.partial.is_empty() && !rest.is_empty() {
            // The carried bytes hold no line end but maybe a final CR: only the new bytes are
            // scanned, and the line is joined once it is complete.
            let next = if self.partial.last() == Some(&b'\r') {
                self.partial.pop();
                usize::from(rest[0] == b'\n')
            } else {
                match find_line_end(rest) {
                    Some((end, next)) => {
                        self.partial.extend_from_slice(&rest[..end]);
                        next
                    }
                    None => {
                        self.partial.extend_from_slice(rest);
                        return Ok(());
                    }
                }
            };
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event)?;
            rest = &rest[next..];
        }
        let used = self.lines(rest, &mut on_event)?;
        self.partial.extend_from_slice(&rest[used..]);
        Ok(())
    }

    /// Bytes held for the event being read: its incomplete line and the data gathered so far.
    pub fn pending_len(&self) -> usize {
        self.partial.len() + self.data.len() + self.event.len()
    }

    /// Handles every complete line of `buf`; returns how many bytes were consumed.
    fn lines<E>(&mut self, buf: &[u8], on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<usize, E> {
        let mut used = 0;
        while let Some((end, next)) = find_line_end(&buf[used..]) {
            self.line(&buf[used..used + end], on_event)?;
            used += next;
        }
        Ok(used)
    }

    /// Ends the input: a trailing line and a pending event are dispatched.
    pub fn finish<E>(&mut self, mut on_event: impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<(), E> {
        let mut line = std::mem::take(&mut self.partial);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.is_empty() {
            self.line(&line, &mut on_event)?;
        }
        self.dispatch(&mut on_event)
    }

    fn line<E>(&mut self, line: &[u8], on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<(), E> {
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
                self.has_event = true;
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch<E>(&mut self, on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>) -> Result<(), E> {
        if !self.has_data && !self.has_event {
            return Ok(());
        }
        let result = on_event(SseEvent { event: &self.event, data: &self.data });
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        self.has_event = false;
        result
    }
}

/// Position of the first line end in `buf`: (end of line content, start of the next line).
/// A CR as the very last byte is not a line end yet (an LF may follow in the next read).
fn find_line_end(buf: &[u8]) -> Option<(usize, usize)> {
    let i = buf.iter().position(|&b| b == b'\n' || b == b'\r')?;
    if buf[i] == b'\n' {
        return Some((i, i + 1));
    }
    match buf.get(i + 1) {
        Some(b'\n') => Some((i, i + 2)),
        Some(_) => Some((i, i + 1)),
        None => None,
    }
}

/// What a mapper tells the stream after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The end marker (`[DONE]`) was seen: stop reading.
    Done,
}

/// Per-provider translation of SSE events into stream events.
pub trait ChunkMapper: Send + 'static {
    /// Maps one event, pushing any produced events onto `out`.
    fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError>;

    /// The stream ended normally: push the final message id and usage.
    fn finish(&mut self, out: &mut VecDeque<StreamEvent>);
}

/// The message id and usage every mapper reports once, after the parts of a finished stream.
pub fn push_trailer(out: &mut VecDeque<StreamEvent>, id: Option<String>, usage: Option<crate::protocol::TokenUsage>) {
    if let Some(id) = id {
        out.push_back(StreamEvent::MessageId(id));
    }
    if let Some(usage) = usage {
        out.push_back(StreamEvent::Usage(usage));
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The event stream of one response.
pub struct SseStream<M> {
    body: Option<ByteStream>,
    parser: SseParser,
    mapper: M,
    queue: VecDeque<StreamEvent>,
    /// An error to report once the queued events are out.
    error: Option<ChatError>,
    /// Whether any content or tool call was produced (an empty reply is an error).
    produced: bool,
    /// The largest event accepted (see [`MAX_EVENT_BYTES`]).
    max_event: usize,
}

impl<M: ChunkMapper> SseStream<M> {
    pub fn new(response: reqwest::Response, mapper: M) -> Self {
        Self::from_bytes(Box::pin(response.bytes_stream()), mapper)
    }

    /// Builds the stream over any byte source (used by tests and benchmarks).
    pub fn from_bytes(body: ByteStream, mapper: M) -> Self {
        Self {
            body: Some(body),
            parser: SseParser::new(),
            mapper,
            queue: VecDeque::new(),
            error: None,
            produced: false,
            max_event: MAX_EVENT_BYTES,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let Self { parser, mapper, queue, .. } = self;
        let mut done = false;
        let result = parser.feed(bytes, |ev| {
            if done {
                return Ok(());
            }
            if mapper.on_event(ev, queue)? == Flow::Done {
                done = true;
            }
            Ok(())
        });
        match result {
            Err(e) => self.fail(e),
            Ok(()) if done => self.end(),
            Ok(()) if self.parser.pending_len() > self.max_event => self.fail(ChatError::Other(format!(
                "The provider's stream sent an event that exceeds the maximum size of {} bytes; the response was abandoned.",
                self.max_event
            ))),
            Ok(()) => {}
        }
    }

    fn end_of_body(&mut self) {
        let Self { parser, mapper, queue, .. } = self;
        let mut done = false;
        let result = parser.finish(|ev| {
            if !done && mapper.on_event(ev, queue)? == Flow::Done {
                done = true;
            }
            Ok(())
        });
        match result {
            Err(e) => self.fail(e),
            Ok(()) => self.end(),
        }
    }

    fn end(&mut self) {
        self.body = None;
        self.mapper.finish(&mut self.queue);
        self.note_produced();
        if !self.produced {
            self.error = Some(ChatError::EmptyResponse);
        }
    }

    fn fail(&mut self, error: ChatError) {
        self.body = None;
        self.error = Some(error);
    }

    fn note_produced(&mut self) {
        if !self.produced {
            self.produced = self.queue.iter().any(|e| matches!(e, StreamEvent::Content(_) | StreamEvent::ToolCall(_)));
        }
    }
}

impl<M: ChunkMapper + Unpin> Stream for SseStream<M> {
    type Item = Result<StreamEvent, ChatError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(ev) = this.queue.pop_front() {
                if !this.produced && matches!(ev, StreamEvent::Content(_) | StreamEvent::ToolCall(_)) {
                    this.produced = true;
                }
                return Poll::Ready(Some(Ok(ev)));
            }
            if let Some(err) = this.error.take() {
                return Poll::Ready(Some(Err(err)));
            }
            let Some(body) = this.body.as_mut() else {
                return Poll::Ready(None);
            };
            match body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => this.feed(&bytes),
                Poll::Ready(Some(Err(e))) => this.fail(http::body_error(&e)),
                Poll::Ready(None) => this.end_of_body(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed::<()>(c, |e| {
                out.push((e.event.to_string(), e.data.to_string()));
                Ok(())
            })
            .unwrap();
        }
        p.finish::<()>(|e| {
            out.push((e.event.to_string(), e.data.to_string()));
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let input: &[u8] =
            b": comment\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\ndata:two\ndata: lines\n\n\rdata: cr\r\rdata: tail";
        let expected = vec![
            ("a".to_string(), "{\"x\":1}".to_string()),
            (String::new(), "two\nlines".to_string()),
            (String::new(), "cr".to_string()),
            (String::new(), "tail".to_string()),
        ];
        assert_eq!(parse_all(&[input]), expected);
        for i in 0..input.len() {
            for j in i..input.len() {
                let got = parse_all(&[&input[..i], &input[i..j], &input[j..]]);
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(parse_all(&bytes), expected);
    }

    /// Hands each event's data length on as text.
    struct Lengths;

    impl ChunkMapper for Lengths {
        fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError> {
            out.push_back(StreamEvent::Content(crate::protocol::ContentPart::text(event.data.len().to_string())));
            Ok(Flow::Continue)
        }

        fn finish(&mut self, _out: &mut VecDeque<StreamEvent>) {}
    }

    /// A line that never ends (or data lines that never close their event)
    /// stops the stream with an error naming the limit, and nothing more is read.
    #[tokio::test]
    async fn an_endless_event_ends_the_stream_with_an_error_naming_the_limit() {
        use futures::StreamExt;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        const CHUNK: usize = 4 << 20;
        let endless_line = Bytes::from(vec![b'x'; CHUNK]);
        let mut data_line = vec![b'x'; CHUNK];
        data_line.splice(0..6, *b"data: ");
        *data_line.last_mut().unwrap() = b'\n';
        for repeated in [endless_line, Bytes::from(data_line)] {
            let pulled = Arc::new(AtomicUsize::new(0));
            let counter = pulled.clone();
            let chunks = std::iter::once(Bytes::from_static(b"data: first\n\ndata: "))
                .chain(std::iter::repeat_n(repeated, MAX_EVENT_BYTES / CHUNK + 4));
            let body = futures::stream::iter(chunks).map(move |b| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(b)
            });
            let mut stream = SseStream::from_bytes(Box::pin(body), Lengths);
            let first = stream.next().await.unwrap().unwrap();
            assert_eq!(first, StreamEvent::Content(crate::protocol::ContentPart::text("5")));
            let error = stream.next().await.unwrap().unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "The provider's stream sent an event that exceeds the maximum size of {MAX_EVENT_BYTES} bytes; the response was abandoned."
                )
            );
            assert_eq!(error.error_type(), "ChatProviderError");
            assert!(stream.next().await.is_none());
            assert!(pulled.load(Ordering::SeqCst) <= MAX_EVENT_BYTES / CHUNK + 2, "read on past the limit");
        }
    }
}
