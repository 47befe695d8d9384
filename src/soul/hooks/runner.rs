//! Running the hooks one point triggers, as a batch (`docs/protocol-1.10.md` §5.2, §5.4).
//!
//! Invariants: no matching hook, nothing happens (no events); once the client has initialized, a
//! batch is announced with `HookTriggered` and closed with `HookResolved` (both recorded), and
//! client subscriptions are asked with a `HookRequest` (never recorded); every hook of a batch runs
//! concurrently and fails open — an error, an invalid answer, a timeout or a client that is gone
//! all allow; the batch blocks when any hook blocked, with the reason of the first blocking one
//! (config hooks first, then subscriptions). A fire-and-forget batch announces itself in order
//! and resolves on its own task, so it never delays what comes next.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::command::{self, Verdict};
use super::{HookRegistry, Matched, Subscription};
use crate::protocol::{Event, HookAction, HookEvent, HookRequest, HookResolved, HookTriggered, Request};
use crate::session::pyjson_ascii;
use crate::soul::sink::{ClientAnswer, EventSink};

/// How a batch ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub blocked: bool,
    /// The reason of the first blocking hook ("" when none gave one).
    pub reason: String,
    /// The first non-empty reason among the blocking hooks.
    pub first_given_reason: Option<String>,
}

/// Runs hooks for one session; cheap to clone.
#[derive(Clone)]
pub struct HookRunner {
    registry: Arc<HookRegistry>,
    sink: EventSink,
    session_id: Arc<str>,
    cwd: Arc<PathBuf>,
    /// Off for points the client never sees (session start and end): no events, no requests.
    visible: bool,
}

/// A batch that was announced and still has to run.
struct Started {
    event: HookEvent,
    target: String,
    matched: Matched,
    input: Map<String, Value>,
    announce: bool,
    began: Instant,
}

impl HookRunner {
    pub fn new(registry: Arc<HookRegistry>, sink: EventSink, session_id: &str, cwd: PathBuf) -> Self {
        Self { registry, sink, session_id: session_id.into(), cwd: Arc::new(cwd), visible: true }
    }

    /// This runner for points the client never sees: config hooks only, silently.
    pub fn hidden(mut self) -> Self {
        self.visible = false;
        self
    }

    /// Runs the batch for `event` / `target` and waits for its decision.
    pub async fn run(&self, event: HookEvent, target: &str, extra: Map<String, Value>) -> Decision {
        match self.start(event, target, extra).await {
            Some(started) => self.finish(started).await,
            None => Decision::default(),
        }
    }

    /// Fire and forget: announced now, and its client subscriptions asked now (so the questions
    /// go out before whatever follows), resolved whenever its hooks are done.
    pub async fn fire(&self, event: HookEvent, target: &str, extra: Map<String, Value>) {
        if let Some(started) = self.start(event, target, extra).await {
            let asked = self.ask_clients(&started).await;
            let runner = self.clone();
            tokio::spawn(async move {
                runner.resolve(started, asked).await;
            });
        }
    }

    async fn start(&self, event: HookEvent, target: &str, extra: Map<String, Value>) -> Option<Started> {
        let mut matched = self.registry.matching(event, target);
        if !self.visible {
            matched.subscriptions.clear();
        }
        if matched.is_empty() {
            return None;
        }
        let announce = self.visible && self.registry.connected();
        if announce {
            let triggered = HookTriggered {
                event: event.as_str().into(),
                target: target.into(),
                hook_count: matched.count() as u32,
            };
            self.sink.emit(Event::HookTriggered(triggered)).await;
        }
        let mut input = Map::new();
        input.insert("hook_event_name".into(), Value::from(event.as_str()));
        input.insert("session_id".into(), Value::from(&*self.session_id));
        input.insert("cwd".into(), Value::from(self.cwd.to_string_lossy().into_owned()));
        input.extend(extra);
        Some(Started { event, target: target.into(), matched, input, announce, began: Instant::now() })
    }

    async fn finish(&self, s: Started) -> Decision {
        let asked = self.ask_clients(&s).await;
        self.resolve(s, asked).await
    }

    /// Sends the batch's client subscriptions their requests; the answers to wait for.
    async fn ask_clients(&self, s: &Started) -> Vec<Asked> {
        let mut asked = Vec::with_capacity(s.matched.subscriptions.len());
        for sub in &s.matched.subscriptions {
            asked.push(self.ask_client(sub, s).await);
        }
        asked
    }

    async fn resolve(&self, s: Started, asked: Vec<Asked>) -> Decision {
        let stdin = pyjson_ascii::to_vec(&s.input);
        let commands = s
            .matched
            .commands
            .iter()
            .map(|h| command::run(&h.command, &stdin, &self.cwd, Duration::from_secs(h.timeout)));
        let clients = asked.into_iter().map(Asked::verdict);
        let (mut verdicts, client_verdicts) =
            futures::join!(futures::future::join_all(commands), futures::future::join_all(clients));
        verdicts.extend(client_verdicts);
        let blocking: Vec<&Verdict> = verdicts.iter().filter(|v| v.block).collect();
        let decision = Decision {
            blocked: !blocking.is_empty(),
            reason: blocking.first().map(|v| v.reason.clone()).unwrap_or_default(),
            first_given_reason: blocking.iter().find(|v| !v.reason.is_empty()).map(|v| v.reason.clone()),
        };
        if s.announce {
            let resolved = HookResolved {
                event: s.event.as_str().into(),
                target: s.target.clone(),
                action: if decision.blocked { HookAction::Block } else { HookAction::Allow },
                reason: decision.reason.clone(),
                duration_ms: s.began.elapsed().as_millis() as u64,
            };
            self.sink.emit(Event::HookResolved(resolved)).await;
        }
        decision
    }

    /// Asks one client subscription (its answer is awaited by [`Asked::verdict`]).
    async fn ask_client(&self, sub: &Subscription, s: &Started) -> Asked {
        let id: String = uuid::Uuid::new_v4().simple().to_string().chars().take(12).collect();
        let request = Request::HookRequest(HookRequest {
            id,
            subscription_id: sub.id.clone(),
            event: s.event.as_str().into(),
            target: s.target.clone(),
            input_data: s.input.clone(),
        });
        let answer = self.sink.request_unrecorded(request).await;
        Asked { answer, timeout: Duration::from_secs(sub.timeout) }
    }
}

/// A client subscription that was asked: its answer, and how long it may take.
struct Asked {
    answer: tokio::sync::oneshot::Receiver<ClientAnswer>,
    timeout: Duration,
}

impl Asked {
    /// The client's answer within its timeout, else allow.
    async fn verdict(self) -> Verdict {
        match tokio::time::timeout(self.timeout, self.answer).await {
            Ok(Ok(ClientAnswer::Hook { action: HookAction::Block, reason })) => Verdict { block: true, reason },
            // Allowed, a wrong answer, the client gone, or out of time: fail open.
            _ => Verdict::allow(),
        }
    }
}

/// `{"key": value, …}` for a hook's extra input members, in order.
pub fn input(members: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    members.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
