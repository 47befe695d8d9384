//! The publication of one session's event stream to every projection watching it.
//!
//! A stdio front end has one subscriber; a web session has one per attached client. Events go to
//! every subscriber, in order, each awaited (a subscriber's own queue is its backpressure and its
//! policy for a slow client). A request to the client (approval, question, external tool call,
//! hook) is put to every subscriber; the first answer wins and reaches the soul, and every other
//! subscriber is told that the request was resolved. A subscriber that attaches while a request
//! waits is asked too. A turn's outcome goes to the subscriber that started the turn; the others
//! observe it.
//!
//! Invariants: the soul's answer channel gets at most one answer; a request stays pending until
//! someone answers or the soul stops waiting (its turn ended or was cancelled), also while no
//! subscriber is attached; a subscriber that goes away mid-request never resolves it for the
//! others.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::protocol::{Event, Request};
use crate::soul::{ClientAnswer, Projection, TurnResult, TurnTag};

/// Names one subscriber of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubscriberId(u64);

#[derive(Clone)]
struct Subscriber {
    id: SubscriberId,
    projection: Arc<dyn Projection>,
}

/// A turn started by one subscriber: its own tag travels inside.
struct Owned {
    owner: SubscriberId,
    tag: TurnTag,
}

/// A request waiting for its first answer.
struct Ask {
    request: Request,
    /// The first answer to arrive here goes to the soul.
    answers: mpsc::Sender<(SubscriberId, ClientAnswer)>,
    /// Cancelled once the request is resolved or abandoned by the soul.
    done: CancellationToken,
    /// Who answered (set before `done`).
    winner: Mutex<Option<SubscriberId>>,
}

#[derive(Default)]
struct Inner {
    /// Replaced whole on attach/detach so an event only clones one `Arc`.
    subscribers: Arc<[Subscriber]>,
    next: u64,
    asks: Vec<Weak<Ask>>,
}

/// The session's one projection, fanning out to its subscribers.
#[derive(Default)]
pub struct Fanout {
    inner: Mutex<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Fanout {
    /// A fan-out with its first subscriber (the front end that opened the session).
    pub fn with(first: Arc<dyn Projection>) -> (Arc<Self>, SubscriberId) {
        let fanout = Arc::new(Self::default());
        let id = fanout.add(first);
        (fanout, id)
    }

    fn add(&self, projection: Arc<dyn Projection>) -> SubscriberId {
        let mut inner = lock(&self.inner);
        inner.next += 1;
        let id = SubscriberId(inner.next);
        let mut all: Vec<Subscriber> = inner.subscribers.iter().cloned().collect();
        all.push(Subscriber { id, projection });
        inner.subscribers = all.into();
        id
    }

    fn subscribers(&self) -> Arc<[Subscriber]> {
        lock(&self.inner).subscribers.clone()
    }

    pub fn subscriber_count(&self) -> usize {
        lock(&self.inner).subscribers.len()
    }

    /// Adds a subscriber and puts every request still waiting to it as well.
    pub fn attach(&self, projection: Arc<dyn Projection>) -> SubscriberId {
        let id = self.add(projection.clone());
        let waiting: Vec<Arc<Ask>> = {
            let mut inner = lock(&self.inner);
            inner.asks.retain(|a| a.strong_count() > 0);
            inner.asks.iter().filter_map(Weak::upgrade).filter(|a| !a.done.is_cancelled()).collect()
        };
        if !waiting.is_empty() {
            let subscriber = Subscriber { id, projection };
            tokio::spawn(async move {
                for ask in waiting {
                    put(ask, subscriber.clone()).await;
                }
            });
        }
        id
    }

    /// Requests put to the subscribers that nobody has answered yet (and the soul still waits
    /// for).
    pub fn waiting_requests(&self) -> usize {
        let mut inner = lock(&self.inner);
        inner.asks.retain(|a| a.strong_count() > 0);
        inner.asks.iter().filter_map(Weak::upgrade).filter(|a| !a.done.is_cancelled()).count()
    }

    /// Removes a subscriber; what it was asked stays open for the others.
    pub fn detach(&self, id: SubscriberId) {
        let mut inner = lock(&self.inner);
        let kept: Vec<Subscriber> = inner.subscribers.iter().filter(|s| s.id != id).cloned().collect();
        inner.subscribers = kept.into();
    }

    /// The tag for a turn that `owner` starts: its outcome goes back to `owner` alone.
    pub fn tag_for(owner: SubscriberId, tag: TurnTag) -> TurnTag {
        TurnTag::new(Owned { owner, tag })
    }
}

/// Asks one subscriber and waits for its answer on a task of its own.
async fn put(ask: Arc<Ask>, subscriber: Subscriber) {
    let answer = subscriber.projection.request(ask.request.clone()).await;
    tokio::spawn(async move {
        let answered = tokio::select! {
            answer = answer => answer.ok(),
            () = ask.done.cancelled() => None,
        };
        if let Some(answer) = answered {
            // Only the first answer finds room; a later one is dropped here.
            let _ = ask.answers.try_send((subscriber.id, answer));
        }
        ask.done.cancelled().await;
        let winner = *lock(&ask.winner);
        if winner.is_some_and(|w| w != subscriber.id) {
            subscriber.projection.resolved(&ask.request).await;
        }
    });
}

/// Hands the first answer to the soul, or gives up when the soul stops waiting.
async fn hold(
    ask: Arc<Ask>,
    mut answers: mpsc::Receiver<(SubscriberId, ClientAnswer)>,
    mut soul: oneshot::Sender<ClientAnswer>,
) {
    tokio::select! {
        Some((from, answer)) = answers.recv() => {
            *lock(&ask.winner) = Some(from);
            let _ = soul.send(answer);
        }
        () = soul.closed() => {}
    }
    ask.done.cancel();
}

impl Projection for Fanout {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for subscriber in self.subscribers().iter() {
                subscriber.projection.event(event).await;
            }
        })
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for subscriber in self.subscribers().iter() {
                subscriber.projection.tool_output(tool_call_id, text).await;
            }
        })
    }

    // The receiver is the answer, awaited by the soul later; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            let (soul, answer) = oneshot::channel();
            let (answers, inbox) = mpsc::channel(1);
            let ask = Arc::new(Ask { request, answers, done: CancellationToken::new(), winner: Mutex::new(None) });
            let subscribers = {
                let mut inner = lock(&self.inner);
                inner.asks.retain(|a| a.strong_count() > 0);
                inner.asks.push(Arc::downgrade(&ask));
                inner.subscribers.clone()
            };
            tokio::spawn(hold(ask.clone(), inbox, soul));
            for subscriber in subscribers.iter() {
                put(ask.clone(), subscriber.clone()).await;
            }
            answer
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let subscribers = self.subscribers();
            // A tag not made by `tag_for` belongs to the first subscriber (stdio front ends).
            let (owner, tag) = match tag.downcast::<Owned>() {
                Ok(owned) => (Some(owned.owner), owned.tag),
                Err(tag) => (subscribers.first().map(|s| s.id), tag),
            };
            for subscriber in subscribers.iter().filter(|s| Some(s.id) != owner) {
                subscriber.projection.turn_observed(&result).await;
            }
            match subscribers.iter().find(|s| Some(s.id) == owner) {
                Some(subscriber) => subscriber.projection.turn_ended(tag, result).await,
                None => tracing::info!("a turn ended after the client that started it left"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ApprovalDecision;
    use crate::soul::TurnOutcome;

    /// Records what it is given; answers requests through a channel the test holds.
    struct Watcher {
        name: &'static str,
        seen: Arc<Mutex<Vec<String>>>,
        asks: mpsc::UnboundedSender<oneshot::Sender<ClientAnswer>>,
    }

    impl Projection for Watcher {
        fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
            let kind = serde_json::to_value(event).unwrap()["type"].as_str().unwrap().to_string();
            lock(&self.seen).push(format!("{}:{kind}", self.name));
            Box::pin(async {})
        }

        #[allow(clippy::async_yields_async)]
        fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
            let (reply, answer) = oneshot::channel();
            lock(&self.seen).push(format!("{}:asked", self.name));
            let _ = self.asks.send(reply);
            Box::pin(async move { answer })
        }

        fn turn_ended(&self, tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
            let tag = tag.take::<&'static str>().unwrap_or("?");
            lock(&self.seen).push(format!("{}:ended:{tag}", self.name));
            Box::pin(async {})
        }

        fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
            lock(&self.seen).push(format!("{}:observed", self.name));
            Box::pin(async {})
        }

        fn resolved<'a>(&'a self, _request: &'a Request) -> BoxFuture<'a, ()> {
            lock(&self.seen).push(format!("{}:resolved", self.name));
            Box::pin(async {})
        }
    }

    fn watcher(
        name: &'static str,
        seen: &Arc<Mutex<Vec<String>>>,
    ) -> (Arc<Watcher>, mpsc::UnboundedReceiver<oneshot::Sender<ClientAnswer>>) {
        let (asks, rx) = mpsc::unbounded_channel();
        (Arc::new(Watcher { name, seen: seen.clone(), asks }), rx)
    }

    fn approval() -> Request {
        serde_json::from_value(serde_json::json!({"type": "ApprovalRequest", "payload": {
            "id": "r1", "tool_call_id": "c1", "sender": "Shell", "action": "run command",
            "description": "ls", "display": []}}))
        .unwrap()
    }

    fn approve() -> ClientAnswer {
        ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() }
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn every_subscriber_sees_every_event_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, _) = watcher("a", &seen);
        let (b, _) = watcher("b", &seen);
        let (fanout, _) = Fanout::with(a);
        fanout.attach(b);
        fanout.event(&Event::StepBegin { n: 1 }).await;
        fanout.event(&Event::TurnEnd {}).await;
        assert_eq!(*lock(&seen), ["a:StepBegin", "b:StepBegin", "a:TurnEnd", "b:TurnEnd"]);
    }

    #[tokio::test]
    async fn the_first_answer_wins_and_the_others_hear_it_was_resolved() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, mut a_asks) = watcher("a", &seen);
        let (b, mut b_asks) = watcher("b", &seen);
        let (fanout, _) = Fanout::with(a);
        fanout.attach(b);
        let answer = fanout.request(approval()).await;
        let (a_reply, b_reply) = (a_asks.recv().await.unwrap(), b_asks.recv().await.unwrap());
        b_reply.send(approve()).unwrap();
        assert_eq!(answer.await.unwrap(), approve());
        settle().await;
        // A's late answer finds nobody waiting for it.
        assert!(a_reply.send(ClientAnswer::Denial("late".into())).is_err());
        assert!(lock(&seen).contains(&"a:resolved".to_string()), "{:?}", lock(&seen));
        assert!(!lock(&seen).contains(&"b:resolved".to_string()));
    }

    #[tokio::test]
    async fn a_subscriber_that_leaves_does_not_resolve_the_request_for_the_others() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, mut a_asks) = watcher("a", &seen);
        let (b, mut b_asks) = watcher("b", &seen);
        let (fanout, a_id) = Fanout::with(a);
        fanout.attach(b);
        let mut answer = fanout.request(approval()).await;
        drop(a_asks.recv().await.unwrap());
        fanout.detach(a_id);
        settle().await;
        assert!(answer.try_recv().is_err(), "still waiting");
        b_asks.recv().await.unwrap().send(approve()).unwrap();
        assert_eq!(answer.await.unwrap(), approve());
    }

    #[tokio::test]
    async fn a_late_subscriber_is_asked_what_still_waits() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, mut a_asks) = watcher("a", &seen);
        let (fanout, a_id) = Fanout::with(a);
        let answer = fanout.request(approval()).await;
        let _a_reply = a_asks.recv().await.unwrap();
        fanout.detach(a_id);
        let (b, mut b_asks) = watcher("b", &seen);
        fanout.attach(b);
        b_asks.recv().await.unwrap().send(approve()).unwrap();
        assert_eq!(answer.await.unwrap(), approve());
    }

    #[tokio::test]
    async fn the_outcome_goes_to_the_owner_and_the_others_observe_it() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, _) = watcher("a", &seen);
        let (b, _) = watcher("b", &seen);
        let (fanout, _) = Fanout::with(a);
        let b_id = fanout.attach(b);
        let outcome = || Ok(TurnOutcome::Cancelled);
        fanout.turn_ended(Fanout::tag_for(b_id, TurnTag::new("mine")), outcome()).await;
        fanout.turn_ended(TurnTag::new("plain"), outcome()).await;
        assert_eq!(*lock(&seen), ["a:observed", "b:ended:mine", "b:observed", "a:ended:plain"]);
    }

    #[tokio::test]
    async fn a_request_the_soul_abandons_ends_for_every_subscriber() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (a, mut a_asks) = watcher("a", &seen);
        let (fanout, _) = Fanout::with(a);
        let answer = fanout.request(approval()).await;
        let reply = a_asks.recv().await.unwrap();
        drop(answer);
        for _ in 0..100 {
            if reply.is_closed() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(reply.is_closed(), "the subscriber's wait ended with the soul's");
    }
}
