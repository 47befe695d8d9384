//! One ACP session: an ordinary kiwi session (built by the session builder, recorded into its
//! `wire.jsonl`) with its own turn driver, projection and model choice. Many live in one process.
//!
//! Invariants: the session folder's lock is held while the session is open here; changing the
//! model rebuilds the agent over the same folder only while no turn runs (the context and state
//! are read back from disk, so nothing is lost).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use std::collections::VecDeque;

use agent_client_protocol::v1::schema::{ConfigOptionUpdate, SessionInfoUpdate, SessionUpdate};

use super::attached::Attached;
use super::client_calls::ClientCalls;
use super::client_fs::AcpFiles;
use super::client_profile::Updates;
use super::errors;
use super::history;
use super::host::{HostedSession, MakeProjection, SessionHost};
use super::mapping::EventMapper;
use super::modes::{self, ModelChoice};
use super::projection::AcpProjection;
use super::terminal_shell::TerminalRunner;
use crate::builder::{AgentSetup, SessionRequest};
use crate::live::LiveSession;
use crate::protocol::{Event, StatusUpdate, UserInput};
use crate::rpc::{ErrorObject, Outbound, Peer, RequestId};
use crate::session::store::SessionChoice;
use crate::soul::{Busy, Projection as _, TurnDriver, TurnOutcome, TurnTag};
use crate::tools::client_files::ClientFiles;
use crate::wire::remote::RemoteError;

/// What every session of the server shares.
pub struct Shared {
    pub setup: AgentSetup,
    pub outbound: Outbound,
    /// `session/update`s, filtered by what the client can parse.
    pub updates: Updates,
    /// kiwi's requests to the client (permission cards, terminals, files) and their answers.
    pub peer: Arc<Peer>,
    /// Where the sessions live: this process (`kiwi acp`) or the web server (`/api/acp`).
    pub host: Arc<dyn SessionHost>,
    /// The client runs terminals for us (`clientCapabilities.terminal`): Shell uses them.
    pub client_terminal: AtomicBool,
    /// The client serves reads / takes writes of files (`clientCapabilities.fs`).
    pub client_read: AtomicBool,
    pub client_write: AtomicBool,
    /// The client shows question forms (`clientCapabilities.elicitation.form`): `AskUserQuestion`
    /// asks through `elicitation/create`.
    pub client_elicitation: AtomicBool,
}

impl Shared {
    fn calls(&self) -> ClientCalls {
        ClientCalls { peer: self.peer.clone() }
    }
}

pub struct AcpSession {
    pub id: String,
    pub cwd: PathBuf,
    pub mapper: Arc<Mutex<EventMapper>>,
    /// Where the session's turns run.
    runs: Runs,
    choice: Mutex<ModelChoice>,
    /// The config the session's options are offered from.
    config: Arc<crate::config::Config>,
    updates: Updates,
    /// Prompts that came while a turn ran, oldest first; each starts when the one before ends.
    queue: Mutex<VecDeque<(UserInput, RequestId)>>,
    /// This session, for the task that waits on the turn driver's slot for a queued prompt.
    me: std::sync::Weak<AcpSession>,
    /// Such a task waits (one at a time).
    waiting_for_slot: AtomicBool,
    /// What the client was last told of the title and the config options.
    announced: Mutex<Announced>,
    /// True once the session's `available_commands_update` went out: a prompt the client sends
    /// right after `session/new` waits for it, so its turn's updates never overtake the list.
    commands_sent: tokio::sync::watch::Sender<bool>,
}

/// Where an ACP session's turns run: the same session object either way, so every ACP method
/// has one code path and only the few places that reach the core differ.
enum Runs {
    /// On a live session of this process (or of the web server hosting it for this client).
    Local(Arc<dyn HostedSession>),
    /// On the host of a session another kiwi process holds (`docs/host.md`), reached through
    /// its socket; `projection` is this client's, `outbound` answers prompts the host refused.
    Remote { link: Attached, projection: Arc<AcpProjection>, outbound: Outbound },
}

/// How long a prompt the host refused as busy waits before it is tried again, when the host's
/// turn ended before its refusal arrived (otherwise the turn's end starts it).
const BUSY_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

#[derive(Default)]
struct Announced {
    title: Option<String>,
    options: Option<Value>,
}

impl AcpSession {
    /// Opens (creates or resumes) a session in `cwd`, or joins it where the host has it open.
    pub async fn open(
        shared: &Shared,
        cwd: &Path,
        choice: SessionChoice,
        mcp_configs: Vec<Value>,
        add_dirs: Vec<PathBuf>,
    ) -> Result<Arc<Self>, ErrorObject> {
        let model = ModelChoice::of(&shared.setup.config, shared.setup.model.as_deref(), shared.setup.thinking);
        // A stored session another process holds: attach to its host instead of failing.
        if let Some(attached) = Self::attach(shared, cwd, &choice, &add_dirs, &model).await {
            return attached;
        }
        let mut setup = session_setup(&shared.setup, &model, &mcp_configs);
        // `additionalDirectories`: as `--add-dir` (added to the workspace, saved with the session).
        setup.invocation.add_dirs.extend(add_dirs);
        let mapper = Arc::new(Mutex::new(EventMapper::new(cwd.to_path_buf(), false)));
        let elicitation = shared.client_elicitation.load(Ordering::SeqCst);
        let made = Arc::new(std::sync::OnceLock::<Arc<AcpProjection>>::new());
        let make: MakeProjection = {
            let (peer, updates, mapper, made) =
                (shared.peer.clone(), shared.updates.clone(), mapper.clone(), made.clone());
            Box::new(move |id: &str, shared: bool| {
                let projection =
                    Arc::new(AcpProjection::new(id.into(), peer, updates, mapper, elicitation).shared(shared));
                let _ = made.set(projection.clone());
                projection as Arc<dyn crate::soul::Projection>
            })
        };
        let request = SessionRequest { work_dir: cwd.to_path_buf(), session: choice, trace: None };
        let hosted = shared.host.open(setup, request, make).await.map_err(|mut e| {
            // The builder names the command-line flag; an ACP client sent `additionalDirectories`.
            e.message = e.message.replace("--add-dir", "additionalDirectories");
            e
        })?;
        let Some(watcher) = made.get().cloned() else {
            return Err(errors::internal("the session was opened without this client"));
        };
        let live = hosted.live().clone();
        let id = live.id().to_string();
        if hosted.exclusive() {
            fit_agent(live.driver(), terminal_shell(shared, &id, &mapper), client_files(shared, &id));
        }
        let agent = live.driver().agent().clone();
        lock(&mapper).set_mode(agent.state.plan_mode(), modes::base_mode(&agent));
        let title = agent.state.read(|s| s.custom_title.clone());
        let session = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            waiting_for_slot: AtomicBool::new(false),
            id,
            cwd: cwd.to_path_buf(),
            mapper,
            runs: Runs::Local(hosted),
            choice: Mutex::new(model),
            config: shared.setup.config.clone(),
            updates: shared.updates.clone(),
            queue: Mutex::default(),
            commands_sent: tokio::sync::watch::Sender::new(false),
            announced: Mutex::new(Announced { title, options: None }),
        });
        watcher.watch(&session);
        Ok(session)
    }

    /// Attaches to the host of the stored session `choice` names when another process holds it
    /// (`docs/host.md` §2); `None` when nobody else does, or when its host cannot be reached
    /// and the lock came free meanwhile (then it is opened here; if it did not, opening it here
    /// fails with today's error).
    async fn attach(
        shared: &Shared,
        cwd: &Path,
        choice: &SessionChoice,
        add_dirs: &[PathBuf],
        model: &ModelChoice,
    ) -> Option<Result<Arc<Self>, ErrorObject>> {
        if !shared.host.attaches() {
            return None;
        }
        let (share, work, asked) = (shared.setup.share_dir.clone(), cwd.to_path_buf(), choice.clone());
        let (id, dir) = tokio::task::spawn_blocking(move || crate::wire::attach::held_elsewhere(&share, &work, &asked))
            .await
            .ok()??;
        let state = crate::session::state::load(&dir);
        let added: Vec<PathBuf> = state.additional_dirs.iter().map(PathBuf::from).collect();
        if let Some(missing) = add_dirs.iter().find(|d| !d.starts_with(cwd) && !added.iter().any(|a| d.starts_with(a)))
        {
            return Some(Err(errors::invalid_params(format!(
                "the session is hosted by another process and `{}` is not in its workspace; add it there with /add-dir",
                missing.display()
            ))));
        }
        let mapper = Arc::new(Mutex::new(EventMapper::new(cwd.to_path_buf(), false)));
        lock(&mapper).set_mode(state.plan_mode, modes::DEFAULT_MODE);
        let elicitation = shared.client_elicitation.load(Ordering::SeqCst);
        // Shared: what ACP cannot answer (hooks, external tools) is left to the host's clients.
        let projection = Arc::new(
            AcpProjection::new(id.clone(), shared.peer.clone(), shared.updates.clone(), mapper.clone(), elicitation)
                .shared(true),
        );
        let link = match Attached::attach(&dir, projection.clone()).await {
            Ok(link) => link,
            Err(e) => {
                tracing::warn!("cannot attach to session {id}: {e}");
                tokio::task::spawn_blocking(move || crate::wire::attach::wait_for_lock(&dir)).await.ok()?;
                return None;
            }
        };
        tracing::info!("session {id} is hosted by another process; attached to it");
        let session = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            waiting_for_slot: AtomicBool::new(false),
            id,
            cwd: cwd.to_path_buf(),
            mapper,
            runs: Runs::Remote { link, projection: projection.clone(), outbound: shared.outbound.clone() },
            choice: Mutex::new(model.clone()),
            config: shared.setup.config.clone(),
            updates: shared.updates.clone(),
            queue: Mutex::default(),
            commands_sent: tokio::sync::watch::Sender::new(false),
            announced: Mutex::new(Announced { title: state.custom_title, options: None }),
        });
        projection.watch(&session);
        Some(Ok(session))
    }

    /// Waits until an attached session's link ends; `true` when its host went away (`false`
    /// at once for a session of this process, and when this client closed it). A prompt on its way there then ends `cancelled`
    /// (the host cancelled its turn); prompts queued meanwhile wait for the take-over.
    pub async fn host_went(&self) -> bool {
        let Runs::Remote { link, .. } = &self.runs else { return false };
        let went = link.host_went().await;
        if went {
            tracing::info!("the host of session {} went away", self.id);
        }
        went
    }

    /// The folder of an attached session (`None` for a session of this process).
    pub fn hosted_dir(&self) -> Option<PathBuf> {
        match &self.runs {
            Runs::Remote { link, .. } => Some(link.dir.clone()),
            Runs::Local(_) => None,
        }
    }

    /// Taking the session over failed: its queued prompts end `cancelled`, later ones get a
    /// clear error.
    pub async fn give_up(&self) {
        let Runs::Remote { link, projection, .. } = &self.runs else { return };
        link.give_up();
        for id in self.take_queued() {
            projection.turn_ended(TurnTag::new(id), Ok(TurnOutcome::Cancelled)).await;
        }
    }

    /// The prompts queued in `old` (the session this one took over), in order, before any of
    /// this session's.
    pub fn adopt_queue(&self, old: &AcpSession) {
        let mut taken: std::collections::VecDeque<_> = lock(&old.queue).drain(..).collect();
        let mut queue = lock(&self.queue);
        taken.extend(queue.drain(..));
        *queue = taken;
    }

    /// The client has the answer that opened the session: an attached session's live updates
    /// may flow now (they never overtake it).
    pub fn answered(&self) {
        if let Runs::Remote { link, .. } = &self.runs {
            link.open_gate();
        }
    }

    /// The session's turns run in another process (`docs/host.md`).
    pub fn is_attached(&self) -> bool {
        matches!(self.runs, Runs::Remote { .. })
    }

    /// Refuses what only a session of this process can do (modes, models, options, undo).
    pub fn local_only(&self) -> Result<(), ErrorObject> {
        match &self.runs {
            Runs::Local(_) => Ok(()),
            Runs::Remote { .. } => Err(errors::internal("the session is hosted by another process; change it there")),
        }
    }

    /// The command list was sent (or there is none to send).
    pub fn commands_sent(&self) {
        self.commands_sent.send_replace(true);
    }

    /// Waits until the command list went out (at most a moment: it follows the answer that
    /// opened the session).
    pub async fn after_commands(&self) {
        let mut sent = self.commands_sent.subscribe();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sent.wait_for(|sent| *sent)).await;
    }

    /// The live session of this process, for its operations (undo, fork); `None` once the
    /// session is closed.
    pub fn live(&self) -> Option<Arc<LiveSession>> {
        match &self.runs {
            Runs::Local(hosted) => (!hosted.live().is_closed()).then(|| hosted.live().clone()),
            Runs::Remote { .. } => None,
        }
    }

    /// The turn driver of the live session; `None` once the session is closed.
    pub fn driver(&self) -> Option<Arc<TurnDriver>> {
        self.live().map(|live| live.driver().clone())
    }

    /// The session takes prompts (it was not closed, its host did not go away).
    pub fn is_open(&self) -> bool {
        match &self.runs {
            Runs::Local(_) => self.live().is_some(),
            Runs::Remote { link, .. } => !link.is_gone(),
        }
    }

    /// Why the session cannot take a request that needs it open.
    fn not_open(&self) -> ErrorObject {
        match &self.runs {
            Runs::Remote { link, .. } if link.is_gone() => errors::internal(
                "the session's host process exited and the session could not be opened here; load it again",
            ),
            Runs::Remote { .. } => errors::internal("the session is hosted by another process; change it there"),
            Runs::Local(_) => errors::session_not_found(),
        }
    }

    /// `session/cancel`: cancels the running turn (whoever started it, for a shared session).
    pub fn cancel(&self) {
        match &self.runs {
            Runs::Local(_) => {
                if let Some(driver) = self.driver() {
                    driver.cancel();
                }
            }
            Runs::Remote { link, .. } => {
                let remote = link.remote().clone();
                tokio::spawn(async move {
                    if let Err(e) = remote.cancel().await {
                        tracing::info!("cancelling the host's turn: {e}");
                    }
                });
            }
        }
    }

    /// `session/load`'s history: every message of the session up to now, as `session/update`s
    /// through the same mapping as live events (`docs/acp.md` §4.5). Refused while a turn runs
    /// in this process (the history would race its records).
    pub async fn replay(&self) -> Result<(), ErrorObject> {
        if let Runs::Remote { link, .. } = &self.runs {
            return self.replay_hosted(link).await;
        }
        let Some(live) = self.live() else { return Err(self.not_open()) };
        let (claim, path) = live.claim_replay().map_err(|_| errors::internal("a prompt is running in this session"))?;
        let replayed = history::replay(&path, &self.cwd, &self.id, &self.updates).await;
        drop(claim);
        replayed.map_err(|e| {
            tracing::error!("session/load replay failed: {e}");
            errors::internal(format!("cannot replay the session: {e}"))
        })
    }

    pub fn model_choice(&self) -> ModelChoice {
        lock(&self.choice).clone()
    }

    /// The history of an attached session: what the host sent up to the attach seam; loaded
    /// again later, the host's file (only while no turn runs there, as for a session of this
    /// process).
    async fn replay_hosted(&self, link: &Attached) -> Result<(), ErrorObject> {
        if !self.is_open() {
            return Err(self.not_open());
        }
        let mut mapper = EventMapper::new(self.cwd.clone(), true);
        let Some(mut batches) = link.take_history() else {
            if link.is_busy() {
                return Err(errors::internal("a prompt is running in this session"));
            }
            let wire = link.dir.join("wire.jsonl");
            return history::replay(&wire, &self.cwd, &self.id, &self.updates).await.map_err(|e| {
                tracing::error!("session/load replay failed: {e}");
                errors::internal(format!("cannot replay the session: {e}"))
            });
        };
        while let Some(batch) = batches.next().await {
            history::send_events(&mut mapper, super::attached::events(batch), &self.id, &self.updates).await;
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// `SessionStart` hooks (not visible to the client, as on the wire).
    pub async fn start_hooks(&self) {
        match &self.runs {
            Runs::Local(hosted) => hosted.start_hooks().await,
            // The host ran them when it opened the session.
            Runs::Remote { .. } => {}
        }
    }

    /// Switches the session to another model choice (the session, its MCP servers and its
    /// tools stay as they are); refused while a turn runs.
    pub fn change_model(&self, shared: &Shared, next: ModelChoice) -> Result<(), ErrorObject> {
        let Some(driver) = self.driver() else { return Err(self.not_open()) };
        if driver.is_busy() {
            return Err(errors::internal("a prompt is running in this session; change the model after it"));
        }
        let base = &shared.setup;
        // Thinking is only forced when it differs from what the config would choose anyway.
        let thinking = Some(next.thinking).filter(|t| base.thinking.is_some() || *t != base.config.default_thinking);
        let agent = driver.agent();
        let model = base.model_switch(agent, next.model.as_deref(), thinking).map_err(errors::internal)?;
        agent.env.model.set(model);
        *lock(&self.choice) = next;
        Ok(())
    }

    /// The current mode (`docs/acp.md` §4.9).
    pub fn mode(&self) -> &'static str {
        match &self.runs {
            // As the host's plan mode was last seen (its state, then its status updates).
            Runs::Remote { .. } => lock(&self.mapper).current_mode(),
            Runs::Local(_) => self.driver().map_or(modes::DEFAULT_MODE, |d| modes::current_mode(d.agent())),
        }
    }

    /// The config options as they stand.
    pub fn config_options(&self) -> Vec<agent_client_protocol::v1::schema::SessionConfigOption> {
        // An attached session's model and options are the host's, set there.
        if self.is_attached() {
            return Vec::new();
        }
        let boolean = self.updates.profile().boolean_options;
        let mut options = modes::config_options(&self.config, &self.model_choice(), self.mode(), boolean);
        if let Some(driver) = self.driver() {
            options.extend(modes::sandbox_option(&driver.agent().env.sandbox));
        }
        options
    }

    /// `session/set_config_option` for `sandbox` (spec sandbox.md §2.5): at least as strict as
    /// the run's mode, from the next Shell call on; in memory only.
    pub async fn set_sandbox(&self, value: &str) -> Result<(), ErrorObject> {
        let Some(driver) = self.driver() else { return Err(self.not_open()) };
        let Some(mode) = crate::sandbox::SandboxMode::parse(value) else {
            return Err(errors::invalid_params(format!("unknown sandbox mode `{value}`")));
        };
        let env = &driver.agent().env;
        env.sandbox.set_mode(mode, &env.share_dir, &env.work_dir).map_err(errors::invalid_params)?;
        self.announce_changes().await;
        Ok(())
    }

    /// Switches the mode (`docs/acp.md` §4.9): the core's approval state, in memory. A change of
    /// plan mode is recorded like the wire's `set_plan_mode`.
    pub async fn set_mode(&self, mode: &str) -> Result<(), ErrorObject> {
        let Some(driver) = self.driver() else { return Err(self.not_open()) };
        let was_plan = driver.agent().state.plan_mode();
        let plan = modes::apply_mode(driver.agent(), mode);
        lock(&self.mapper).set_base_mode(modes::base_mode(driver.agent()));
        if plan != was_plan {
            driver.sink().emit(Event::StatusUpdate(StatusUpdate::plan_mode(plan))).await;
        }
        self.announce_changes().await;
        Ok(())
    }

    /// Tells the client what changed since it was last told, from any side (a slash command, a
    /// tool, the client's own request): `current_mode_update`, `config_option_update`,
    /// `session_info_update` with the title.
    pub async fn announce_changes(&self) {
        let Some(driver) = self.driver() else { return };
        let agent = driver.agent();
        let mut updates = Vec::new();
        if let Some(update) = lock(&self.mapper).announce_mode(agent.state.plan_mode(), modes::base_mode(agent)) {
            updates.push(update);
        }
        let options = self.config_options();
        let value = serde_json::to_value(&options).ok();
        let title = agent.state.read(|s| s.custom_title.clone());
        {
            let mut announced = lock(&self.announced);
            if announced.options != value {
                // The first look only records what the session answer already said.
                if announced.options.is_some() {
                    updates.push(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)));
                }
                announced.options = value;
            }
            if title.is_some() && announced.title != title {
                announced.title = title.clone();
                if let Some(title) = title {
                    updates.push(SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title)));
                }
            }
        }
        for update in updates {
            self.updates.send(&self.id, update).await;
        }
    }

    /// Records the config options the client got with a session answer.
    pub fn options_sent(&self) {
        let value = serde_json::to_value(self.config_options()).ok();
        lock(&self.announced).options = value;
    }

    /// Starts `input` now, or queues it behind the running turn (`docs/acp.md` §4.12).
    pub fn prompt(&self, input: UserInput, id: RequestId) -> Result<(), ErrorObject> {
        // While the session is being taken over from a host that went away, prompts wait.
        let handing_over = matches!(&self.runs, Runs::Remote { link, .. } if !link.is_over());
        if !self.is_open() && !handing_over {
            return Err(self.not_open());
        }
        lock(&self.queue).push_back((input, id));
        self.pump();
        Ok(())
    }

    /// Starts the oldest queued prompt if no turn runs.
    pub fn pump(&self) {
        if !self.is_open() {
            return;
        }
        let mut queue = lock(&self.queue);
        if let Some((input, id)) = queue.pop_front() {
            lock(&self.mapper).own_turn_next(true);
            let started = match &self.runs {
                Runs::Local(hosted) => hosted.start_turn(input.clone(), &id),
                Runs::Remote { link, projection, outbound } => {
                    if link.is_busy() || !link.begin_prompt() {
                        Err(Busy)
                    } else {
                        let (remote, projection, outbound) =
                            (link.remote().clone(), projection.clone(), outbound.clone());
                        tokio::spawn(remote_turn(remote, projection, outbound, input.clone(), id.clone()));
                        Ok(())
                    }
                }
            };
            if let Err(Busy) = started {
                lock(&self.mapper).own_turn_next(false);
                queue.push_front((input, id));
                drop(queue);
                self.start_when_idle();
            }
        }
    }

    /// A queued prompt found the session's turn driver busy: a turn's end pumps the queue
    /// (`Projection::turn_ended` / `turn_observed`), but a claim (another client's undo or
    /// replay) ends without one, so a task waits on the driver's slot itself (`TurnDriver::idle`).
    fn start_when_idle(&self) {
        let Some(driver) = self.driver() else { return };
        if self.waiting_for_slot.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.me.clone();
        tokio::spawn(async move {
            driver.idle().await;
            if let Some(session) = me.upgrade() {
                session.waiting_for_slot.store(false, Ordering::SeqCst);
                session.pump();
            }
        });
    }

    /// The first of `dirs` that is neither the work dir (or inside it) nor one of the session's
    /// additional directories.
    pub fn missing_dir<'a>(&self, dirs: &'a [PathBuf]) -> Option<&'a PathBuf> {
        let added: Vec<PathBuf> = match &self.runs {
            Runs::Remote { link, .. } => crate::session::state::load(&link.dir).additional_dirs,
            Runs::Local(_) => self.driver().map(|d| d.agent().state.additional_dirs()).unwrap_or_default(),
        }
        .into_iter()
        .map(PathBuf::from)
        .collect();
        dirs.iter().find(|dir| !dir.starts_with(&self.cwd) && !added.iter().any(|a| dir.starts_with(a)))
    }

    /// A turn runs or a prompt waits for one.
    pub fn is_running(&self) -> bool {
        let busy = match &self.runs {
            Runs::Remote { link, .. } => link.is_busy(),
            Runs::Local(_) => self.driver().is_some_and(|d| d.is_busy()),
        };
        busy || !lock(&self.queue).is_empty()
    }

    /// The queued prompts, taken (a cancel answers them `cancelled`).
    pub fn take_queued(&self) -> Vec<RequestId> {
        lock(&self.queue).drain(..).map(|(_, id)| id).collect()
    }

    /// `session/close`: over stdio it cancels what runs, stops the session's background tasks,
    /// runs the `SessionEnd` hooks and releases the session folder (the process goes on); a
    /// shared session only loses this client.
    pub async fn close(&self) {
        match &self.runs {
            Runs::Local(hosted) => hosted.close().await,
            // The host goes on; this process only leaves it.
            Runs::Remote { link, .. } => link.detach(),
        }
    }

    /// The client went away: its turn is cancelled where the session is its own.
    pub fn disconnect(&self) {
        match &self.runs {
            Runs::Local(hosted) => hosted.disconnect(),
            Runs::Remote { link, .. } => link.detach(),
        }
    }

    /// A prompt the host refused as busy waits for the host's turn to end (its end pumps the
    /// queue; when it ended before the refusal came, the prompt is tried again shortly).
    async fn requeue(&self, input: UserInput, id: RequestId) {
        lock(&self.mapper).own_turn_next(false);
        lock(&self.queue).push_front((input, id));
        if !self.is_running_elsewhere() {
            tokio::time::sleep(BUSY_RETRY).await;
            self.pump();
        }
    }

    fn is_running_elsewhere(&self) -> bool {
        matches!(&self.runs, Runs::Remote { link, .. } if link.is_busy())
    }
}

/// One prompt of this client as a turn of the host: its updates reach the client through the
/// projection as they come; its end answers the prompt as a turn of this process would.
async fn remote_turn(
    remote: crate::wire::remote::Remote,
    projection: Arc<AcpProjection>,
    outbound: Outbound,
    input: UserInput,
    id: RequestId,
) {
    let result = remote.prompt(input.clone()).await;
    let session = projection.session();
    if let Some(Runs::Remote { link, .. }) = session.as_ref().map(|s| &s.runs) {
        link.end_prompt();
    }
    match result {
        Ok(result) => projection.turn_ended(TurnTag::new(id), result).await,
        Err(RemoteError::Busy) => match session {
            Some(session) => session.requeue(input, id).await,
            None => outbound.error(Some(&id), &errors::internal(RemoteError::Busy.to_string())).await,
        },
        // The host went away before it took the prompt.
        Err(RemoteError::Gone) => projection.turn_ended(TurnTag::new(id), Ok(TurnOutcome::Cancelled)).await,
        Err(RemoteError::Rpc { message, .. }) => outbound.error(Some(&id), &errors::internal(message)).await,
    }
}

/// Shell through the client's terminal, when the client has one. A confined command never
/// uses it (spec sandbox.md §2.5): the tool runs those itself; an approved escalation may.
fn terminal_shell(shared: &Shared, id: &str, mapper: &Arc<Mutex<EventMapper>>) -> Option<crate::tools::shell::Shell> {
    if !shared.client_terminal.load(Ordering::SeqCst) {
        return None;
    }
    let runner = TerminalRunner::new(id.to_string(), shared.calls(), shared.updates.clone(), mapper.clone());
    Some(crate::tools::shell::Shell::with_runner(Arc::new(runner)))
}

fn client_files(shared: &Shared, id: &str) -> Option<Arc<dyn ClientFiles>> {
    let (read, write) = (shared.client_read.load(Ordering::SeqCst), shared.client_write.load(Ordering::SeqCst));
    if !read && !write {
        return None;
    }
    Some(Arc::new(AcpFiles { session_id: id.to_string(), calls: shared.calls(), read, write }))
}

/// Fits the agent to what the client offers: its files, its terminals, its modes.
fn fit_agent(driver: &TurnDriver, shell: Option<crate::tools::shell::Shell>, files: Option<Arc<dyn ClientFiles>>) {
    if let Some(files) = files {
        driver.agent().client.set_files(files);
    }
    // Only an agent that has Shell gets the terminal one in its place.
    if let Some(shell) = shell
        && driver.agent().toolset().get("Shell").is_some()
    {
        let shell = crate::tools::shell::into_tool(shell, &driver.agent().env);
        driver.agent().update_toolset(|set| set.insert(shell));
    }
    // Every ACP client can answer questions, through a form or permission cards
    // (`docs/acp.md` §5.6); plan mode is an ACP mode, so its tools are offered.
    driver.agent().client.handshake(Some((true, true)));
}

fn session_setup(base: &AgentSetup, choice: &ModelChoice, mcp_configs: &[Value]) -> AgentSetup {
    let mut setup = base.clone();
    setup.model = choice.model.clone();
    // Thinking is only forced when it differs from what the config would choose anyway.
    setup.thinking = Some(choice.thinking).filter(|t| base.thinking.is_some() || *t != base.config.default_thinking);
    // The user's own servers (`mcp.json`, `--mcp-config`) and then the client's for this
    // session: a client server with the same name replaces the user's.
    setup.mcp_configs.extend(mcp_configs.iter().cloned());
    setup
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
