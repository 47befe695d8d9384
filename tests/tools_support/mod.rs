//! Shared set-up for the built-in tool tests: a temp work dir, an agent environment, the default toolset and
//! a tool-call context whose approval channel the test can answer.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use kiwi::agent_env::AgentEnv;
use kiwi::config::Config;
use kiwi::llm::Capability;
use kiwi::protocol::{ApprovalDecision, ApprovalRequest, DisplayBlock, Event, Request, ToolOutput, ToolReturnValue};
use kiwi::soul::approval::{ApprovalHub, ApprovalOrigin};
use kiwi::soul::host::SoulToolHost;
use kiwi::soul::state::SessionState;
use kiwi::soul::{ClientAnswer, EventSink, Projection, TurnResult, TurnTag};
use kiwi::tools::{ToolCallContext, Toolset, builtin};
use serde_json::Value;
use tokio::sync::mpsc::{Receiver, Sender};
use tokio::sync::oneshot;

/// A request the tool under test sent, with the channel for its answer.
pub type AskedRequest = (Request, oneshot::Sender<ClientAnswer>);

/// Hands every request to the test; events are not looked at.
struct ChannelProjection(Sender<AskedRequest>);

impl Projection for ChannelProjection {
    fn event<'a>(&'a self, _: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let _ = self.0.send((request, reply)).await;
            answer
        })
    }

    fn turn_ended(&self, _: TurnTag, _: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub env: Arc<AgentEnv>,
    pub toolset: Toolset,
    pub ctx: ToolCallContext,
    pub rx: Receiver<AskedRequest>,
}

pub fn runtime(work_dir: &Path, config: Config, caps: &[Capability]) -> Arc<AgentEnv> {
    Arc::new(AgentEnv {
        work_dir: work_dir.to_path_buf(),
        share_dir: work_dir.join(".share"),
        session_dir: work_dir.join(".session"),
        session_id: "test-session".into(),
        config: Arc::new(config),
        model: kiwi::agent_env::ModelSlot::new(kiwi::agent_env::Model {
            capabilities: caps.iter().copied().collect::<BTreeSet<_>>(),
            ..Default::default()
        }),
        sandbox: Default::default(),
    })
}

pub fn harness(yolo: bool) -> Harness {
    harness_with(yolo, Config::default(), &[])
}

pub fn harness_with(yolo: bool, config: Config, caps: &[Capability]) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    // Canonical, like the real work dir (macOS-style /tmp symlinks would otherwise differ).
    let work = dir.path().canonicalize().expect("canonical");
    let env = runtime(&work, config, caps);
    let toolset = Toolset::new(builtin::default_tools(&env));
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let sink = EventSink::new(Arc::new(ChannelProjection(tx)), None);
    let hub = ApprovalHub::new(Arc::new(SessionState::in_memory(yolo)));
    let host = Arc::new(SoulToolHost::new(hub, Arc::default(), sink, ApprovalOrigin::main_turn("turn")));
    let ctx = ToolCallContext { tool_call_id: "tc-1".into(), raw_arguments: None, env: Arc::clone(&env), host };
    Harness { dir, env, toolset, ctx, rx }
}

impl Harness {
    pub fn work(&self) -> PathBuf {
        self.env.work_dir.clone()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.work().join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        p
    }

    pub async fn call(&self, name: &str, args: Value) -> ToolReturnValue {
        self.toolset.dispatch(name, Some(&args.to_string()), &self.ctx).await
    }

    pub async fn call_raw(&self, name: &str, args: Option<&str>) -> ToolReturnValue {
        self.toolset.dispatch(name, args, &self.ctx).await
    }

    /// Runs a call while answering its approval request with `decision`; returns the result and
    /// the request that was sent.
    pub async fn call_answering(
        &mut self,
        name: &str,
        args: Value,
        decision: ApprovalDecision,
    ) -> (ToolReturnValue, Option<ApprovalRequest>) {
        let args = args.to_string();
        let (toolset, ctx, rx) = (&self.toolset, &self.ctx, &mut self.rx);
        let call = toolset.dispatch(name, Some(&args), ctx);
        let answer = async {
            loop {
                match rx.recv().await {
                    Some((Request::ApprovalRequest(req), reply)) => {
                        let _ = reply.send(ClientAnswer::Approval { decision, feedback: String::new() });
                        return Some(req);
                    }
                    Some(_) => continue,
                    None => return None,
                }
            }
        };
        tokio::pin!(call);
        tokio::pin!(answer);
        // The call may finish without asking (validation errors): stop waiting then.
        let mut request = None;
        let result = loop {
            tokio::select! {
                r = &mut call => break r,
                req = &mut answer, if request.is_none() => { request = req; }
            }
        };
        (result, request)
    }
}

pub fn text(r: &ToolReturnValue) -> &str {
    match &r.output {
        ToolOutput::Text(t) => t,
        ToolOutput::Parts(_) => panic!("output is parts"),
    }
}

pub fn brief(r: &ToolReturnValue) -> Option<&str> {
    match r.display.first() {
        Some(DisplayBlock::Brief { text }) => Some(text),
        _ => None,
    }
}

pub fn diffs(blocks: &[DisplayBlock]) -> Vec<(String, String, String)> {
    blocks
        .iter()
        .filter_map(|b| match b {
            DisplayBlock::Diff(d) => Some((d.path.clone(), d.old_text.clone(), d.new_text.clone())),
            _ => None,
        })
        .collect()
}

/// The process group id a Shell command wrote to `path` (`echo $$ > path`), once it is there.
pub async fn wait_for_pgid(path: &std::path::Path) -> i32 {
    for _ in 0..200 {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(pgid) = s.trim().parse::<i32>()
        {
            return pgid;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("command did not start");
}

/// True when no process of group `pgid` is left within `limit`.
pub async fn gone_within(pgid: i32, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if !kiwi::tools::process::group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}
