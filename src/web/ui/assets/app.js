// The kiwi web UI: sessions sidebar, one open session (conversation + composer), dialogs and
// panels. See docs/web-ui.md for what each part does and which endpoint it uses.

import { adoptTokenFromUrl, api, ApiError, filePath, getToken, onUnauthorized, setToken, uploadFile, withToken } from "./api.js";
import { h, clear, icon, relTime, shortPath, toast, modal, confirmDialog, promptDialog } from "./dom.js";
import { SessionSocket } from "./socket.js";
import { Conversation } from "./conversation.js";
import { todoView } from "./blocks.js";

const UPLOAD_ONLY = "KIMI_FILE_UPLOAD_WITHOUT_MESSAGE";
const PAGE = 100;
const $ = (id) => document.getElementById(id);

const state = {
  sessions: [],
  offset: 0,
  more: false,
  archived: false,
  q: "",
  current: null,
  socket: null,
  conv: null,
  status: null,
  queue: [],
  attachments: [],
  slash: [],
  config: null,
  planMode: false,
  requests: 0,
  stats: {},
  // The session's dollar budget (initialize's `cost` member), for the status line.
  budget: null,
  searchHits: [],
  searchAt: 0,
  openInDisabled: localStorage.getItem("kiwi.openin.off") === "1",
  openPrintRuns: new Set(),
};

const channel = "BroadcastChannel" in window ? new BroadcastChannel("kiwi") : null;

// ------------------------------------------------------------------ start

function init() {
  adoptTokenFromUrl();
  applyTheme(localStorage.getItem("kiwi.theme"));
  onUnauthorized(() => askToken(true));
  bindSidebar();
  bindComposer();
  bindTopbar();
  state.conv = new Conversation($("conversation"), $("requests"), {
    onFork: forkAt,
    sessionId: () => (state.current ? state.current.session_id : null),
    respond: (id, result) => state.socket.respond(id, result),
    onTodos: showTodos,
    onStatusUpdate: (p) => {
      Object.assign(state.stats, Object.fromEntries(Object.entries(p).filter(([, v]) => v !== null && v !== undefined)));
      renderStatusLine();
    },
    onPlanMode: (on) => setPlanMode(on),
    onRequestsChanged: (n) => {
      state.requests = n;
      document.title = n && document.hidden ? `(!) ${titleText()}` : titleText();
    },
  });
  if (channel) {
    channel.onmessage = (e) => {
      if (e.data === "config") loadConfig();
      if (e.data === "sessions") loadSessions();
    };
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) document.title = titleText();
  });
  loadConfig();
  loadSessions();
  setInterval(() => {
    // Not while the reader has a session's menu open: the list would be rebuilt under it.
    if (!document.hidden && !document.querySelector("#session-list .dropdown-menu:not([hidden])")) loadSessions(true);
  }, 10000);
  route();
  window.addEventListener("popstate", route);
}

function route() {
  const params = new URLSearchParams(window.location.search);
  const action = params.get("action");
  const sid = params.get("session");
  if (action === "create") {
    history.replaceState(null, "", "/");
    newSessionDialog();
  } else if (action === "create-in-dir" && params.get("workDir")) {
    history.replaceState(null, "", "/");
    createSession(params.get("workDir"), false);
  } else if (sid && (!state.current || state.current.session_id !== sid)) {
    openSession(sid, false);
  } else if (!sid && state.current) {
    closeSession();
  }
}

function titleText() {
  return state.current ? `${state.current.title} · kiwi` : "kiwi";
}

// ------------------------------------------------------------------ token and theme

async function askToken(unauthorized) {
  if (state.askingToken) return;
  state.askingToken = true;
  const value = await modal(unauthorized ? "Access token needed" : "Access token", (done) => {
    const input = h("input", { type: "password", autocomplete: "off", value: getToken() || "", "aria-label": "Token" });
    return h(
      "form",
      { class: "modal-body", onsubmit: (e) => (e.preventDefault(), done(input.value)) },
      h("p", { class: "muted", text: "kiwi web printed a token when it started (the Token line, or the ?token= part of its URL)." }),
      h("label", { class: "field" }, h("span", { text: "Token" }), input),
      h("div", { class: "modal-actions" }, h("button", { type: "button", onclick: () => done(null) }, "Cancel"), h("button", { type: "submit", class: "primary" }, "Use token")),
    );
  });
  state.askingToken = false;
  if (value !== null) {
    setToken(value);
    loadConfig();
    loadSessions();
    if (state.current) openSession(state.current.session_id, false);
  }
}

function applyTheme(theme) {
  const t = theme === "dark" || theme === "light" ? theme : window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = t;
}

// ------------------------------------------------------------------ sessions sidebar

function bindSidebar() {
  $("new-session").onclick = () => newSessionDialog();
  $("welcome-new").onclick = () => newSessionDialog();
  let searchTimer = null;
  $("session-search").oninput = (e) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      state.q = e.target.value;
      loadSessions();
    }, 250);
  };
  const seg = (archived) => {
    state.archived = archived;
    $("show-active").classList.toggle("on", !archived);
    $("show-archived").classList.toggle("on", archived);
    $("show-active").setAttribute("aria-pressed", String(!archived));
    $("show-archived").setAttribute("aria-pressed", String(archived));
    loadSessions();
  };
  $("show-active").onclick = () => seg(false);
  $("show-archived").onclick = () => seg(true);
  $("theme-toggle").onclick = () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    localStorage.setItem("kiwi.theme", next);
    applyTheme(next);
  };
  $("token-button").onclick = () => askToken(false);
  $("menu-btn").onclick = () => toggleSidebar(true);
  $("scrim").onclick = () => toggleSidebar(false);
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.shiftKey && e.key.toLowerCase() === "o") {
      e.preventDefault();
      newSessionDialog();
    }
    // Esc stops the running turn, unless it closed a menu or a dialog first.
    if (e.key === "Escape" && !e.defaultPrevented && busy() && !document.querySelector("dialog[open]")) {
      e.preventDefault();
      cancelTurn();
    }
  });
}

function toggleSidebar(open) {
  document.body.classList.toggle("sidebar-open", open);
  $("scrim").hidden = !open;
}

/** Loads the first page again (or, with `keep`, as many pages as are shown). */
async function loadSessions(keep) {
  const limit = keep ? Math.max(PAGE, state.offset) : PAGE;
  const params = new URLSearchParams({ limit: String(limit), offset: "0", kiwi_origin: "1" });
  if (state.q.trim()) params.set("q", state.q.trim());
  if (state.archived) params.set("archived", "true");
  try {
    const list = await api("GET", `/api/sessions/?${params}`);
    state.sessions = list || [];
    state.offset = state.sessions.length;
    state.more = state.sessions.length >= limit;
    renderSessions();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) renderSessionsError(e.message);
  }
}

async function loadMoreSessions() {
  const params = new URLSearchParams({ limit: String(PAGE), offset: String(state.offset), kiwi_origin: "1" });
  if (state.q.trim()) params.set("q", state.q.trim());
  if (state.archived) params.set("archived", "true");
  try {
    const list = (await api("GET", `/api/sessions/?${params}`)) || [];
    state.sessions.push(...list);
    state.offset += list.length;
    state.more = list.length >= PAGE;
    renderSessions();
  } catch (e) {
    toast(e.message, "error");
  }
}

function renderSessionsError(text) {
  clear($("session-list")).appendChild(h("div", { class: "error-row", text: `Could not load sessions: ${text}` }));
}

function renderSessions() {
  const box = clear($("session-list"));
  if (!state.sessions.length) {
    box.appendChild(h("div", { class: "muted side-empty", text: state.q ? "No matching sessions." : state.archived ? "No archived sessions." : "No sessions yet." }));
    return;
  }
  const groups = new Map();
  for (const s of state.sessions) {
    if (!groups.has(s.work_dir)) groups.set(s.work_dir, []);
    groups.get(s.work_dir).push(s);
  }
  for (const [dir, list] of groups) {
    box.appendChild(
      h(
        "div",
        { class: "group" },
        h(
          "div",
          { class: "group-head", title: dir },
          h("span", { class: "group-name", text: shortPath(dir) }),
          h("button", { type: "button", class: "icon-btn small", title: `New session in ${dir}`, "aria-label": `New session in ${dir}`, onclick: () => createSession(dir, false) }, "+"),
        ),
        list.filter((s) => !isPrintRun(s)).map(sessionItem),
        printRuns(dir, list.filter(isPrintRun)),
      ),
    );
  }
  if (state.more) box.appendChild(h("button", { type: "button", class: "link-btn more", onclick: loadMoreSessions }, "Load more"));
}

/** A session a print run (`kiwi --print`, a script, an SDK program) created (`kiwi_origin`). */
function isPrintRun(s) {
  return s.kiwi_origin === "print";
}

/** A work dir's print-run sessions, folded under one row so they do not bury the user's own
 * (open while one of them is the open session). */
function printRuns(dir, list) {
  if (!list.length) return null;
  const open = state.openPrintRuns.has(dir) || list.some((s) => state.current && state.current.session_id === s.session_id);
  const box = h("details", { class: "print-runs", open }, h("summary", { class: "print-runs-head", text: `Print runs (${list.length})` }), list.map(sessionItem));
  box.addEventListener("toggle", () => (box.open ? state.openPrintRuns.add(dir) : state.openPrintRuns.delete(dir)));
  return box;
}

function sessionBusy(s) {
  if (state.current && state.current.session_id === s.session_id && state.status) return state.status.state === "busy";
  return !!(s.status && s.status.state === "busy");
}

function sessionItem(s) {
  const active = state.current && state.current.session_id === s.session_id;
  const busy = sessionBusy(s);
  const menu = h("div", { class: "dropdown-menu", hidden: true });
  const item = h(
    "div",
    { class: `session-item${active ? " active" : ""}`, dataset: { id: s.session_id } },
    h(
      "a",
      {
        href: `?session=${s.session_id}`,
        class: "session-link",
        onclick: (e) => {
          e.preventDefault();
          openSession(s.session_id, true);
        },
      },
      h("span", { class: `dot${busy ? " busy" : s.is_running ? " running" : ""}`, title: busy ? "working" : s.is_running ? "open" : "", "aria-label": busy ? "working" : "" }),
      h("span", { class: "session-title" }, isPrintRun(s) ? h("span", { class: "badge print-badge", title: "Created by a print-mode run", text: "print" }) : null, s.title || "Untitled"),
      h("span", { class: "session-time muted", text: relTime(s.last_updated) }),
    ),
    h(
      "div",
      { class: "dropdown" },
      h("button", { type: "button", class: "icon-btn small", "aria-label": `Actions for ${s.title}`, title: "Actions", onclick: (e) => (e.stopPropagation(), toggleMenu(menu)) }, "⋯"),
      menu,
    ),
  );
  menu.append(
    h("button", { type: "button", onclick: () => (closeMenus(), renameSession(s)) }, "Rename"),
    h("button", { type: "button", onclick: () => (closeMenus(), archiveSession(s, !s.archived)) }, s.archived ? "Unarchive" : "Archive"),
    h("button", { type: "button", class: "danger", onclick: () => (closeMenus(), deleteSession(s)) }, "Delete"),
  );
  return item;
}

function toggleMenu(menu) {
  const open = menu.hidden;
  closeMenus();
  menu.hidden = !open;
}

function closeMenus() {
  document.querySelectorAll(".dropdown-menu").forEach((m) => (m.hidden = true));
}
document.addEventListener("click", (e) => {
  if (!e.target.closest(".dropdown")) closeMenus();
});

async function renameSession(s) {
  const title = await promptDialog("Rename session", "Title", s.title || "");
  if (title === null) return;
  if (!title.trim()) return toast("A title cannot be empty.", "error");
  try {
    const updated = await api("PATCH", `/api/sessions/${s.session_id}`, { title: title.slice(0, 200) });
    if (state.current && state.current.session_id === s.session_id) {
      state.current.title = updated.title;
      renderHeader();
    }
    changed();
  } catch (e) {
    toast(e.message, "error");
  }
}

async function archiveSession(s, archived) {
  try {
    await api("PATCH", `/api/sessions/${s.session_id}`, { archived });
    toast(archived ? "Session archived" : "Session restored");
    changed();
  } catch (e) {
    toast(e.message, "error");
  }
}

async function deleteSession(s) {
  if (!(await confirmDialog("Delete session", `Delete “${s.title}” and its files in the session folder? This cannot be undone.`, "Delete", true))) return;
  try {
    await api("DELETE", `/api/sessions/${s.session_id}`);
    if (state.current && state.current.session_id === s.session_id) closeSession(true);
    changed();
  } catch (e) {
    toast(e.message, "error");
  }
}

function changed() {
  loadSessions();
  if (channel) channel.postMessage("sessions");
}

// ------------------------------------------------------------------ new session

async function newSessionDialog(prefill) {
  let startup = prefill || "";
  let suggestions = [];
  try {
    [startup, suggestions] = await Promise.all([prefill ? Promise.resolve(prefill) : api("GET", "/api/work-dirs/startup"), api("GET", "/api/work-dirs/")]);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return;
  }
  const dir = await modal("New session", (done) => {
    const input = h("input", { type: "text", value: startup || "", list: "wd-suggest", "aria-label": "Work directory", spellcheck: "false", autocapitalize: "off" });
    const list = h("datalist", { id: "wd-suggest" }, (suggestions || []).map((p) => h("option", { value: p })));
    const recent = (suggestions || []).length
      ? h("div", { class: "recent-dirs" }, h("div", { class: "muted", text: "Recent work directories" }), (suggestions || []).map((p) => h("button", { type: "button", class: "chip", onclick: () => done(p) }, p)))
      : null;
    setTimeout(() => input.select(), 0);
    return h(
      "form",
      { class: "modal-body", onsubmit: (e) => (e.preventDefault(), done(input.value.trim())) },
      h("label", { class: "field" }, h("span", { text: "Work directory" }), input, list),
      recent,
      h("div", { class: "modal-actions" }, h("button", { type: "button", onclick: () => done(null) }, "Cancel"), h("button", { type: "submit", class: "primary" }, "Create")),
    );
  });
  if (dir !== null) createSession(dir, false);
}

async function createSession(workDir, createDir) {
  try {
    const body = { work_dir: workDir || null };
    if (createDir) body.create_dir = true;
    const s = await api("POST", "/api/sessions/", body);
    changed();
    openSession(s.session_id, true, s);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && String(e.detail).startsWith("Directory does not exist")) {
      if (await confirmDialog("Create directory?", `${e.detail}. Create it and start the session there?`, "Create directory")) createSession(workDir, true);
      return;
    }
    toast(e.message, "error");
  }
}

// ------------------------------------------------------------------ open a session

async function openSession(id, push, known) {
  let s = known;
  if (!s) {
    try {
      s = await api("GET", `/api/sessions/${encodeURIComponent(id)}`);
    } catch (e) {
      toast(e.message, "error");
      return;
    }
  }
  if (!s) {
    toast("Session not found", "error");
    if (push !== false) history.replaceState(null, "", "/");
    closeSession();
    return;
  }
  if (state.socket) state.socket.close();
  state.current = s;
  state.status = null;
  state.queue = [];
  state.stats = {};
  state.slash = [];
  renderQueue();
  showTodos([]);
  setPlanMode(false);
  closeSearch();
  if (push) history.pushState(null, "", `?session=${s.session_id}`);
  document.body.classList.add("has-session");
  $("welcome").hidden = true;
  $("composer-wrap").hidden = false;
  $("top-actions").hidden = false;
  $("banner").hidden = true;
  toggleSidebar(false);
  renderHeader();
  renderSessions();
  closePanel();
  state.socket = new SessionSocket(s.session_id, {
    onReset: () => {
      state.conv.reset();
      state.status = null;
      renderComposer();
    },
    onHistoryComplete: () => {
      state.conv.setLive(true);
      loadMarks(s.session_id);
    },
    onStatus: onStatus,
    onEvent: (type, payload, live) => {
      if (type === "StepBegin") state.stats.step = payload.n;
      if (type === "TurnBegin") state.stats.step = 0;
      // A new turn has cost nothing yet (a live one; replayed history carries no cost).
      if (live && type === "TurnBegin" && state.stats.cost) state.stats.cost = { ...state.stats.cost, turn_usd: 0 };
      state.conv.event(type, payload);
      if (live && type === "TurnBegin") state.conv.streaming = true;
      renderStatusLine();
    },
    onRequest: (type, payload, id, live) => {
      state.conv.request(type, payload, id, live);
      if (live && document.hidden) notify(type === "ApprovalRequest" ? "Approval needed" : "The agent asks a question");
    },
    onInitialized: (result) => {
      state.slash = (result && result.slash_commands) || [];
      // The session's cost so far (null when its model has no prices) and its dollar budget.
      const cost = result && result.cost;
      state.budget = cost ? cost.max_budget_usd : null;
      if (cost && typeof cost.session_usd === "number") state.stats.cost = { session_usd: cost.session_usd, turn_usd: null };
      renderStatusLine();
    },
    onConnection: (conn, detail) => {
      const el = $("conn-state");
      el.dataset.state = conn;
      el.title = detail ? `${conn}: ${detail}` : conn;
      el.textContent = conn === "open" ? "" : conn === "connecting" ? "connecting…" : conn === "retrying" ? "reconnecting…" : "";
      if (conn === "not_found") showBanner("Session not found. It may have been deleted.");
      renderComposer();
    },
    onForeignError: (err) => console.warn("kiwi: error for another request", err),
    onForeignResult: (result) => {
      if (result && result.status === "cancelled") state.conv.markStopped();
    },
    isWaitingOnUser: () => state.requests > 0,
  });
  refreshChanges();
  // Ready to type: the caret is in the composer (not on touch screens, where it opens the keyboard).
  if (!window.matchMedia("(pointer: coarse)").matches) $("prompt").focus();
}

/** "Approved"/"Rejected" and "Stopped." from the session's record (kiwi's own route): the
 * history replay does not carry them, as the reference's record keeps no approvals. */
async function loadMarks(sessionId) {
  try {
    const marks = await api("GET", `/api/sessions/${encodeURIComponent(sessionId)}/kiwi-marks`);
    if (state.current && state.current.session_id === sessionId) state.conv.applyMarks(marks);
  } catch (e) {
    console.warn("kiwi: marks not loaded", e);
  }
}

function closeSession(deleted) {
  if (state.socket) state.socket.close();
  state.socket = null;
  state.current = null;
  state.status = null;
  state.conv.reset();
  document.body.classList.remove("has-session");
  $("welcome").hidden = false;
  $("composer-wrap").hidden = true;
  $("top-actions").hidden = true;
  showTodos([]);
  closePanel();
  if (deleted || new URLSearchParams(location.search).has("session")) history.replaceState(null, "", "/");
  renderHeader();
  renderSessions();
}

function renderHeader() {
  const s = state.current;
  $("session-title").textContent = s ? s.title || "Untitled" : "kiwi";
  $("session-sub").textContent = s ? s.work_dir : "";
  $("session-sub").title = s ? s.work_dir : "";
  document.title = titleText();
  $("open-in").hidden = !s || state.openInDisabled;
}

function showBanner(text) {
  const b = $("banner");
  b.textContent = text;
  b.hidden = !text;
}

function onStatus(st) {
  const was = state.status ? state.status.state : null;
  state.status = st;
  if (st.state === "busy") state.conv.streaming = true;
  if (st.state === "idle" || st.state === "stopped") {
    state.conv.settle();
    if (was === "busy") {
      refreshChanges();
      setTimeout(dequeue, 0);
    }
  }
  showBanner(st.state === "error" ? `Session error: ${st.detail || st.reason || "unknown"}` : "");
  if (st.reason === "config_update" && st.state === "idle") loadConfig();
  renderComposer();
  renderStatusLine();
  // Keep the sidebar's busy dot in step with this session.
  const dot = document.querySelector(`.session-item[data-id="${CSS.escape(st.session_id || "")}"] .dot`);
  if (dot) dot.classList.toggle("busy", st.state === "busy");
}

function notify(text) {
  document.title = `(!) ${titleText()}`;
  if ("Notification" in window && Notification.permission === "granted") {
    try {
      new Notification("kiwi", { body: text });
    } catch {
      /* some browsers only allow notifications from a service worker */
    }
  }
}

// ------------------------------------------------------------------ composer

function bindComposer() {
  const prompt = $("prompt");
  $("composer").onsubmit = (e) => {
    e.preventDefault();
    submit();
  };
  prompt.addEventListener("keydown", (e) => {
    if (menuKey(e)) return;
    const coarse = window.matchMedia("(pointer: coarse)").matches;
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !coarse) {
      e.preventDefault();
      submit();
    }
  });
  prompt.addEventListener("input", () => {
    autosize();
    updateMenu();
  });
  prompt.addEventListener("click", updateMenu);
  prompt.addEventListener("blur", () => setTimeout(hideMenu, 150));
  prompt.addEventListener("paste", (e) => {
    const files = [...(e.clipboardData?.files || [])];
    if (files.length) {
      e.preventDefault();
      addAttachments(files);
    }
  });
  $("file-input").onchange = (e) => {
    addAttachments([...e.target.files]);
    e.target.value = "";
  };
  const wrap = $("composer-wrap");
  wrap.addEventListener("dragover", (e) => {
    e.preventDefault();
    wrap.classList.add("drop");
  });
  wrap.addEventListener("dragleave", () => wrap.classList.remove("drop"));
  wrap.addEventListener("drop", (e) => {
    e.preventDefault();
    wrap.classList.remove("drop");
    addAttachments([...(e.dataTransfer?.files || [])]);
  });
  $("stop-btn").onclick = cancelTurn;
  $("plan-toggle").onclick = togglePlan;
  $("model-select").onchange = (e) => changeModel(e.target.value);
  $("thinking-toggle").onclick = toggleThinking;
}

function autosize() {
  const p = $("prompt");
  p.style.height = "auto";
  p.style.height = `${Math.min(p.scrollHeight, window.innerHeight * 0.4)}px`;
}

function busy() {
  return !!(state.status && state.status.state === "busy");
}

function renderComposer() {
  const st = state.status ? state.status.state : null;
  const connected = state.socket && state.socket.ws && state.socket.ws.readyState === WebSocket.OPEN;
  $("stop-btn").hidden = st !== "busy";
  $("send-btn").textContent = st === "busy" ? "Queue" : "Send";
  $("send-btn").title = st === "busy" ? "The agent is working: the message waits until the turn ends (or steer it in from the queue)" : "Send (Enter)";
  $("send-btn").disabled = !connected || st === "restarting";
  $("composer-wrap").dataset.state = st || "connecting";
}

function addAttachments(files) {
  for (const f of files) state.attachments.push(f);
  renderAttachments();
}

function renderAttachments() {
  const box = clear($("attach-list"));
  state.attachments.forEach((f, i) =>
    box.appendChild(
      h("span", { class: "chip" }, icon("clip"), f.name, h("button", { type: "button", class: "chip-x", "aria-label": `Remove ${f.name}`, onclick: () => (state.attachments.splice(i, 1), renderAttachments()) }, "✕")),
    ),
  );
}

function submit() {
  const text = $("prompt").value;
  const files = state.attachments.slice();
  if (!text.trim() && !files.length) return;
  $("prompt").value = "";
  state.attachments = [];
  renderAttachments();
  autosize();
  hideMenu();
  if (busy() || state.queue.length) {
    state.queue.push({ text, files });
    renderQueue();
    dequeue();
    return;
  }
  sendPrompt(text, files);
}

async function sendPrompt(text, files) {
  const sock = state.socket;
  const session = state.current;
  if (!sock || !session) return;
  try {
    for (const f of files) await uploadFile(session.session_id, f);
  } catch (e) {
    toast(`Upload failed: ${e.message}`, "error");
    state.queue.unshift({ text, files });
    renderQueue();
    return;
  }
  const input = text.trim() ? text : UPLOAD_ONLY;
  state.conv.scrollToBottom();
  const firstTurn = state.conv.turnCount === 0;
  try {
    const result = await sock.request("prompt", { user_input: input });
    if (result && result.status === "cancelled" && state.current === session) state.conv.markStopped();
    if (result && result.status === "max_steps_reached") state.conv.addError(`The turn stopped after ${result.steps} steps (the step limit).`);
    if (result && result.status === "token_budget_reached") state.conv.addError(`The session's token budget is used up (${result.tokens} of ${result.max_session_tokens} tokens).`);
    if (result && result.status === "budget_reached") state.conv.addError(`The session's dollar budget is used up (${fmtUsd(result.cost_usd)} of ${fmtUsd(result.max_budget_usd)}).`);
    if (result && result.status === "finished" && firstTurn && state.current === session) generateTitle(session);
  } catch (e) {
    if (e.code === -32000) {
      state.queue.unshift({ text, files: [] });
      renderQueue();
      toast("The session is busy: your message was queued.");
      return;
    }
    if (e.code === -32001 && state.current === session) {
      // No model yet: say which key is missing where, and offer to set one up.
      state.conv.addError(e.data && e.data.detail ? `${e.message}: ${e.data.detail}` : e.message);
      showSetup();
      return;
    }
    if (state.current === session && e.code !== undefined) state.conv.addError(e.message);
    else if (e.code === undefined) toast(`Not sent: ${e.message}`, "error");
  }
}

async function generateTitle(session) {
  try {
    const { title } = await api("POST", `/api/sessions/${session.session_id}/generate-title`, {});
    if (state.current === session && title) {
      session.title = title;
      renderHeader();
    }
    changed();
  } catch (e) {
    console.info("kiwi: no generated title", e.message);
  }
}

function dequeue() {
  if (busy() || !state.queue.length) return;
  const item = state.queue.shift();
  renderQueue();
  sendPrompt(item.text, item.files);
}

function renderQueue() {
  const box = clear($("queue"));
  box.hidden = !state.queue.length;
  if (!state.queue.length) return;
  box.appendChild(h("div", { class: "muted queue-head", text: `Queued (${state.queue.length}) — sent when the agent is done` }));
  state.queue.forEach((item, i) => {
    box.appendChild(
      h(
        "div",
        { class: "queue-item" },
        h("span", { class: "queue-text", text: item.text || `${item.files.length} attachment(s)` }),
        item.files.length ? h("span", { class: "badge" }, icon("clip"), String(item.files.length)) : null,
        busy() && !item.files.length ? h("button", { type: "button", class: "link-btn", title: "Send it into the running turn now", onclick: () => steer(i) }, "Steer now") : null,
        h("button", { type: "button", class: "link-btn", onclick: () => ((($("prompt").value = item.text), state.queue.splice(i, 1)), renderQueue(), autosize()) }, "Edit"),
        h("button", { type: "button", class: "icon-btn small", "aria-label": "Remove", onclick: () => (state.queue.splice(i, 1), renderQueue()) }, "✕"),
      ),
    );
  });
}

async function steer(i) {
  const item = state.queue[i];
  if (!item) return;
  try {
    await state.socket.request("steer", { user_input: item.text });
    state.queue.splice(state.queue.indexOf(item), 1);
    renderQueue();
  } catch (e) {
    toast(`Could not steer: ${e.message}`, "error");
  }
}

async function cancelTurn() {
  try {
    await state.socket.request("cancel");
  } catch (e) {
    toast(`Stop failed: ${e.message}`, "error");
  }
}

// ------------------------------------------------------------------ slash commands and @ files

const menu = { items: [], index: 0, kind: null, cache: new Map() };

function hideMenu() {
  $("menu-pop").hidden = true;
  menu.items = [];
}

function showMenu(items, kind, apply) {
  menu.items = items;
  menu.kind = kind;
  menu.apply = apply;
  menu.index = 0;
  const box = clear($("menu-pop"));
  if (!items.length) {
    box.hidden = true;
    return;
  }
  items.forEach((it, i) =>
    box.appendChild(
      h(
        "button",
        { type: "button", role: "option", class: i === 0 ? "sel" : "", onmousedown: (e) => (e.preventDefault(), apply(it)) },
        h("span", { class: "menu-main", text: it.label }),
        it.hint ? h("span", { class: "muted menu-hint", text: it.hint }) : null,
      ),
    ),
  );
  box.hidden = false;
}

function menuKey(e) {
  if ($("menu-pop").hidden || !menu.items.length) return false;
  const buttons = [...$("menu-pop").children];
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    menu.index = (menu.index + (e.key === "ArrowDown" ? 1 : -1) + menu.items.length) % menu.items.length;
    buttons.forEach((b, i) => b.classList.toggle("sel", i === menu.index));
    buttons[menu.index].scrollIntoView({ block: "nearest" });
    return true;
  }
  if (e.key === "Tab" || (e.key === "Enter" && !e.shiftKey)) {
    e.preventDefault();
    menu.apply(menu.items[menu.index]);
    return true;
  }
  if (e.key === "Escape") {
    e.preventDefault();
    hideMenu();
    return true;
  }
  return false;
}

async function updateMenu() {
  const p = $("prompt");
  const before = p.value.slice(0, p.selectionStart);
  const slash = /^\/([\w:-]*)$/.exec(before);
  if (slash) {
    const q = slash[1].toLowerCase();
    const items = state.slash
      .filter((c) => c.name.toLowerCase().startsWith(q) || (c.aliases || []).some((a) => a.toLowerCase().startsWith(q)))
      .slice(0, 30)
      .map((c) => ({ label: `/${c.name}`, hint: c.description, value: c.name }));
    showMenu(items, "slash", (it) => {
      p.value = `/${it.value} ${p.value.slice(p.selectionStart)}`;
      p.setSelectionRange(it.value.length + 2, it.value.length + 2);
      hideMenu();
      p.focus();
    });
    return;
  }
  const at = /(^|\s)@([^\s@]*)$/.exec(before);
  if (at && state.current) {
    const token = at[2];
    const slashAt = token.lastIndexOf("/");
    const dir = slashAt >= 0 ? token.slice(0, slashAt) : "";
    const prefix = token.slice(slashAt + 1).toLowerCase();
    const key = `${state.current.session_id}:${dir}`;
    let entries = menu.cache.get(key);
    if (!entries) {
      try {
        entries = await api("GET", filePath(state.current.session_id, dir));
        if (!Array.isArray(entries)) entries = [];
      } catch {
        entries = [];
      }
      menu.cache.set(key, entries);
      setTimeout(() => menu.cache.delete(key), 30000);
    }
    const items = entries
      .filter((e) => e.name.toLowerCase().startsWith(prefix) && (prefix.startsWith(".") || !e.name.startsWith(".")))
      .slice(0, 40)
      .map((e) => ({ label: e.type === "directory" ? `${e.name}/` : e.name, hint: e.type === "directory" ? "folder" : "", path: dir ? `${dir}/${e.name}` : e.name, dir: e.type === "directory" }));
    showMenu(items, "file", (it) => {
      const start = p.selectionStart - token.length;
      const insert = it.dir ? `${it.path}/` : `${it.path} `;
      p.value = p.value.slice(0, start) + insert + p.value.slice(p.selectionStart);
      const caret = start + insert.length;
      p.setSelectionRange(caret, caret);
      p.focus();
      if (it.dir) updateMenu();
      else hideMenu();
    });
    return;
  }
  hideMenu();
}

// ------------------------------------------------------------------ plan mode, model, thinking

function setPlanMode(on) {
  state.planMode = on;
  const b = $("plan-toggle");
  b.setAttribute("aria-pressed", String(on));
  b.classList.toggle("on", on);
  document.body.classList.toggle("plan-mode", on);
}

async function togglePlan() {
  try {
    const r = await state.socket.request("set_plan_mode", { enabled: !state.planMode });
    setPlanMode(!!(r && r.plan_mode));
  } catch (e) {
    toast(`Plan mode: ${e.message}`, "error");
  }
}

async function loadConfig() {
  try {
    state.config = await api("GET", "/api/config/");
  } catch (e) {
    state.config = null;
  }
  renderModel();
  // A fresh install has no model: show what to do before the first prompt fails.
  if (state.config && !(state.config.models || []).length && !state.setupOffered) {
    state.setupOffered = true;
    showSetup();
  }
}

function currentModel() {
  const c = state.config;
  return c ? (c.models || []).find((m) => m.name === c.default_model) : null;
}

function renderModel() {
  const sel = $("model-select");
  const c = state.config;
  if (!c || !(c.models || []).length) {
    sel.hidden = true;
    $("thinking-toggle").hidden = true;
    return;
  }
  clear(sel);
  for (const m of c.models) sel.appendChild(h("option", { value: m.name, selected: m.name === c.default_model }, m.display_name || m.name));
  sel.hidden = false;
  const caps = (currentModel() || {}).capabilities || [];
  const t = $("thinking-toggle");
  const always = caps.includes("always_thinking");
  const can = caps.includes("thinking") || always;
  const on = always || (can && c.default_thinking);
  t.hidden = false;
  t.disabled = !can || always;
  t.classList.toggle("on", on);
  t.setAttribute("aria-pressed", String(on));
  t.title = always ? "This model always thinks" : can ? "Thinking" : "This model cannot think";
}

async function patchConfig(body) {
  try {
    let r = await api("PATCH", "/api/config/", body);
    if (r.skipped_busy_session_ids && r.skipped_busy_session_ids.length) {
      const n = r.skipped_busy_session_ids.length;
      if (await confirmDialog("Sessions are busy", `${n} busy session(s) keep the old setting until restarted. Restart them now (their running turn is lost)?`, "Force restart", true)) {
        r = await api("PATCH", "/api/config/", { ...body, force_restart_busy_sessions: true });
      }
    }
    state.config = r.config;
    renderModel();
    if (channel) channel.postMessage("config");
  } catch (e) {
    toast(e.message, "error");
    renderModel();
  }
}

function changeModel(name) {
  patchConfig({ default_model: name });
}

function toggleThinking() {
  if (!state.config) return;
  patchConfig({ default_thinking: !state.config.default_thinking });
}

// ------------------------------------------------------------------ status line and todos

function fmtTokens(n) {
  if (typeof n !== "number") return "?";
  return n >= 1000 ? `${(n / 1000).toFixed(n >= 100000 ? 0 : 1)}k` : String(n);
}

/** Dollars as people read them: cents from a cent up, four decimals below. */
function fmtUsd(n) {
  if (typeof n !== "number") return "?";
  return n >= 0.01 || n === 0 ? `$${n.toFixed(2)}` : `$${n.toFixed(4)}`;
}

function renderStatusLine() {
  const box = clear($("status-line"));
  const st = state.status;
  const labels = { busy: "working", idle: "ready", stopped: "ready", restarting: "restarting…", error: "error" };
  box.appendChild(h("span", { class: `state-pill s-${st ? st.state : "none"}`, text: st ? labels[st.state] || st.state : "connecting…" }));
  const s = state.stats;
  if (typeof s.context_usage === "number") {
    const pct = Math.min(100, s.context_usage * 100);
    box.appendChild(
      h(
        "span",
        { class: "ctx-usage", title: "Context window used" },
        h("span", { class: "ctx-bar" }, h("span", { class: "ctx-fill", style: `width:${pct.toFixed(1)}%` })),
        ` ${pct < 10 ? pct.toFixed(1) : pct.toFixed(0)}%`,
        typeof s.context_tokens === "number" ? ` · ${fmtTokens(s.context_tokens)}/${fmtTokens(s.max_context_tokens)}` : "",
      ),
    );
  }
  if (s.token_usage) {
    const u = s.token_usage;
    box.appendChild(h("span", { class: "muted", title: "Tokens of the last model call", text: `in ${fmtTokens((u.input_other || 0) + (u.input_cache_read || 0) + (u.input_cache_creation || 0))} · out ${fmtTokens(u.output || 0)}` }));
  }
  if (s.cost) {
    // Only what kiwi could price: no model prices, no cost shown (never a guess).
    const turn = typeof s.cost.turn_usd === "number" ? ` · turn ${fmtUsd(s.cost.turn_usd)}` : "";
    const budget = typeof state.budget === "number" ? ` of ${fmtUsd(state.budget)}` : "";
    box.appendChild(h("span", { class: "muted cost", title: "What this session's model calls cost (US dollars)", text: `${fmtUsd(s.cost.session_usd)}${budget}${turn}` }));
  }
  if (st && st.state === "busy" && s.step) box.appendChild(h("span", { class: "muted", text: `step ${s.step}` }));
  if (s.mcp_status && s.mcp_status.total) box.appendChild(h("span", { class: "muted", text: `MCP ${s.mcp_status.connected}/${s.mcp_status.total}` }));
  if (state.planMode) box.appendChild(h("span", { class: "badge plan-badge", text: "plan mode" }));
}

function showTodos(items) {
  const bar = $("todo-bar");
  bar.hidden = !items.length;
  if (!items.length) return;
  const done = items.filter((i) => i.status === "done").length;
  const current = items.find((i) => i.status === "in_progress");
  const toggle = $("todo-toggle");
  toggle.textContent = `☑ Todo ${done}/${items.length}${current ? ` · ${current.title}` : ""}`;
  const list = $("todo-items");
  clear(list).appendChild(todoView(items));
  toggle.onclick = () => {
    list.hidden = !list.hidden;
    toggle.setAttribute("aria-expanded", String(!list.hidden));
  };
}

// ------------------------------------------------------------------ fork

async function forkAt(turnIndex) {
  const s = state.current;
  if (!s) return;
  if (!(await confirmDialog("Fork session", `Start a new session with the conversation up to and including turn ${turnIndex + 1}?`, "Fork"))) return;
  try {
    const fork = await api("POST", `/api/sessions/${s.session_id}/fork`, { turn_index: turnIndex });
    changed();
    openSession(fork.session_id, true, fork);
    toast("Forked into a new session");
  } catch (e) {
    toast(e.message, "error");
  }
}

// ------------------------------------------------------------------ topbar: search, files, changes, info, open-in

function bindTopbar() {
  $("search-btn").onclick = () => {
    $("search-bar").hidden = false;
    $("msg-search").focus();
  };
  $("search-close").onclick = closeSearch;
  $("msg-search").oninput = (e) => {
    state.searchHits = state.conv.search(e.target.value);
    state.searchAt = 0;
    showHit();
  };
  $("msg-search").onkeydown = (e) => {
    if (e.key === "Enter") (e.shiftKey ? stepHit(-1) : stepHit(1), e.preventDefault());
    if (e.key === "Escape") closeSearch();
  };
  $("search-next").onclick = () => stepHit(1);
  $("search-prev").onclick = () => stepHit(-1);
  $("files-btn").onclick = () => showFiles("");
  $("info-btn").onclick = showInfo;
  $("changes-badge").onclick = showChanges;
  $("panel-close").onclick = closePanel;
  $("open-in-btn").onclick = (e) => {
    e.stopPropagation();
    const m = $("open-in-menu");
    clear(m);
    const mac = /Mac/i.test(navigator.platform || navigator.userAgent);
    const apps = [["vscode", "VS Code"], ["cursor", "Cursor"], ["antigravity", "Antigravity"]];
    if (mac) apps.unshift(["finder", "Finder"]), apps.push(["iterm", "iTerm"], ["terminal", "Terminal"]);
    else apps.push(["finder", "Explorer"], ["terminal", "Terminal"]);
    for (const [app, label] of apps) m.appendChild(h("button", { type: "button", onclick: () => (closeMenus(), openIn(app)) }, label));
    toggleMenu(m);
  };
}

function closeSearch() {
  $("search-bar").hidden = true;
  $("msg-search").value = "";
  state.searchHits = state.conv ? state.conv.search("") : [];
  $("search-count").textContent = "";
}

function stepHit(d) {
  if (!state.searchHits.length) return;
  state.searchAt = (state.searchAt + d + state.searchHits.length) % state.searchHits.length;
  showHit();
}

function showHit() {
  const hits = state.searchHits;
  $("search-count").textContent = hits.length ? `${state.searchAt + 1}/${hits.length}` : $("msg-search").value ? "no match" : "";
  hits.forEach((e, i) => e.classList.toggle("hit-current", i === state.searchAt));
  if (hits[state.searchAt]) hits[state.searchAt].scrollIntoView({ block: "center" });
}

function openPanel(title, body) {
  $("panel-title").textContent = title;
  clear($("panel-body")).appendChild(body);
  $("panel").hidden = false;
  document.body.classList.add("panel-open");
}

function closePanel() {
  $("panel").hidden = true;
  document.body.classList.remove("panel-open");
}

async function showFiles(dir) {
  const s = state.current;
  if (!s) return;
  let entries;
  try {
    entries = await api("GET", filePath(s.session_id, dir));
  } catch (e) {
    return toast(e.message, "error");
  }
  const crumbs = h("div", { class: "crumbs" });
  const parts = dir ? dir.split("/") : [];
  crumbs.appendChild(h("button", { type: "button", class: "link-btn", onclick: () => showFiles("") }, shortPath(s.work_dir) || "/"));
  parts.forEach((p, i) => crumbs.append(" / ", h("button", { type: "button", class: "link-btn", onclick: () => showFiles(parts.slice(0, i + 1).join("/")) }, p)));
  const list = h(
    "ul",
    { class: "file-list" },
    (Array.isArray(entries) ? entries : []).map((e) => {
      const rel = dir ? `${dir}/${e.name}` : e.name;
      if (e.type === "directory") return h("li", null, h("button", { type: "button", class: "file-entry dir", onclick: () => showFiles(rel) }, icon("folder"), e.name));
      return h(
        "li",
        null,
        h("a", { class: "file-entry", href: withToken(filePath(s.session_id, rel)), download: e.name }, icon("file"), e.name),
        h("span", { class: "muted size", text: fmtSize(e.size) }),
        h("button", { type: "button", class: "link-btn", title: "Mention in the message", onclick: () => mention(rel) }, "@"),
      );
    }),
  );
  if (!entries || !entries.length) list.appendChild(h("li", { class: "muted", text: "Empty folder" }));
  openPanel("Files", h("div", null, crumbs, list));
}

function mention(rel) {
  const p = $("prompt");
  p.value = `${p.value}${p.value && !p.value.endsWith(" ") ? " " : ""}@${rel} `;
  p.focus();
  autosize();
}

function fmtSize(n) {
  if (typeof n !== "number") return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

async function refreshChanges() {
  const s = state.current;
  const badge = $("changes-badge");
  if (!s) return (badge.hidden = true);
  try {
    const d = await api("GET", `/api/sessions/${s.session_id}/git-diff`);
    if (state.current !== s) return;
    state.diff = d;
    badge.hidden = !d.is_git_repo;
    clear(badge).append(
      d.error ? "git: error" : d.has_changes ? "" : "no changes",
      d.has_changes && !d.error ? h("span", { class: "add-n", text: `+${d.total_additions}` }) : "",
      d.has_changes && !d.error ? " " : "",
      d.has_changes && !d.error ? h("span", { class: "del-n", text: `−${d.total_deletions}` }) : "",
    );
    badge.title = d.error || `${d.files.length} changed file(s)`;
  } catch {
    badge.hidden = true;
  }
}

function showChanges() {
  const d = state.diff;
  if (!d) return;
  const body = h(
    "div",
    null,
    d.error ? h("div", { class: "error-row", text: d.error }) : null,
    h("p", { class: "muted", text: d.has_changes ? `${d.files.length} file(s), +${d.total_additions} −${d.total_deletions}` : "The work dir has no uncommitted changes." }),
    h(
      "ul",
      { class: "file-list" },
      d.files.map((f) => h("li", null, h("span", { class: `badge st-${f.status}`, text: f.status }), " ", h("span", { class: "path", text: f.path }), " ", h("span", { class: "add-n", text: `+${f.additions}` }), " ", h("span", { class: "del-n", text: `−${f.deletions}` }))),
    ),
  );
  openPanel("Changes", body);
}

function showInfo() {
  const s = state.current;
  if (!s) return;
  const row = (k, v) => h("div", { class: "info-row" }, h("dt", { text: k }), h("dd", null, h("code", { text: v || "—" })));
  const st = state.status;
  openPanel(
    "Session",
    h(
      "div",
      null,
      h("dl", { class: "info" }, row("Title", s.title), row("Session id", s.session_id), row("Work dir", s.work_dir), row("Session dir", s.session_dir), row("State", st ? `${st.state}${st.reason ? ` (${st.reason})` : ""}` : "connecting")),
      h(
        "div",
        { class: "panel-actions" },
        h("button", { type: "button", onclick: () => renameSession(s) }, "Rename"),
        h("a", { class: "button", id: "export-link", href: withToken(`/api/sessions/${s.session_id}/export`), download: `session-${s.session_id}.zip` }, "Export (ZIP)"),
        h("button", { type: "button", onclick: () => archiveSession(s, !s.archived) }, s.archived ? "Unarchive" : "Archive"),
        h("button", { type: "button", class: "danger", onclick: () => deleteSession(s) }, "Delete"),
      ),
    ),
  );
}

// ------------------------------------------------------------------ model setup

const PROVIDER_TYPES = ["kimi", "openai_legacy", "openai_responses", "anthropic", "gemini", "vertexai", "_echo"];

/** TOML table key from free text: lowercase letters, digits, `_` and `-`. */
function tomlKey(text) {
  return (text || "").toLowerCase().replace(/[^a-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "") || "model";
}

/**
 * The setup panel for a config without a usable model: writes a provider and a model into the
 * config file through the config API (`PUT /api/config/toml`, then `PATCH /api/config/` to make
 * it the default, which restarts the open sessions on it).
 */
function showSetup() {
  const type = h("input", { type: "text", id: "setup-type", list: "setup-types", value: "kimi", spellcheck: "false", autocapitalize: "off" });
  const types = h("datalist", { id: "setup-types" }, PROVIDER_TYPES.map((t) => h("option", { value: t })));
  const url = h("input", { type: "text", inputmode: "url", id: "setup-url", placeholder: "https://api.moonshot.ai/v1", spellcheck: "false" });
  const model = h("input", { type: "text", id: "setup-model", placeholder: "kimi-k2-turbo-preview", spellcheck: "false", autocapitalize: "off" });
  const key = h("input", { type: "password", id: "setup-key", autocomplete: "off" });
  const error = h("div", { class: "error-row", hidden: true });
  const save = async (e) => {
    e.preventDefault();
    error.hidden = true;
    const name = model.value.trim();
    if (!name) {
      error.textContent = "A model name is needed.";
      error.hidden = false;
      return;
    }
    const mkey = tomlKey(name);
    const pkey = `${mkey}-provider`;
    const q = (v) => JSON.stringify(v);
    try {
      const current = await api("GET", "/api/config/toml");
      const added = [
        "",
        `[providers.${pkey}]`,
        `type = ${q(type.value.trim())}`,
        `base_url = ${q(url.value.trim())}`,
        `api_key = ${q(key.value)}`,
        "",
        `[models.${mkey}]`,
        `provider = ${q(pkey)}`,
        `model = ${q(name)}`,
        "max_context_size = 131072",
        "",
      ].join("\n");
      const written = await api("PUT", "/api/config/toml", { content: `${(current.content || "").trimEnd()}\n${added}` });
      if (!written.success) throw new Error(written.error || "the config was not saved");
      await patchConfig({ default_model: mkey });
      closePanel();
      toast(`Model “${mkey}” set up in ${current.path}`);
      $("prompt").focus();
    } catch (err) {
      error.textContent = `Not saved: ${err.message}`;
      error.hidden = false;
    }
  };
  const field = (label, input, hint) => h("label", { class: "field" }, h("span", { text: label }), input, hint ? h("small", { class: "muted", text: hint }) : null);
  openPanel(
    "Set up a model",
    h(
      "form",
      { class: "setup", id: "setup-form", onsubmit: save },
      h("p", { class: "muted", text: "kiwi has no model to answer with yet. Add one to the config file:" }),
      h("label", { class: "field" }, h("span", { text: "Provider type" }), type, types),
      field("Base URL", url, "The provider's API address (empty for the test providers)."),
      field("Model name", model, "The provider's model id."),
      field("API key", key, "Stored in the config file; never shown again by the server."),
      error,
      h("div", { class: "panel-actions" }, h("button", { type: "submit", class: "primary" }, "Save and use")),
      h("p", { class: "muted" }, "Have a Kimi account? Run ", h("code", { text: "kiwi login" }), " in a terminal instead, then reload this page."),
    ),
  );
  setTimeout(() => model.focus(), 0);
}

async function openIn(app) {
  const s = state.current;
  if (!s) return;
  try {
    await api("POST", "/api/open-in", { app, path: s.work_dir });
  } catch (e) {
    if (e instanceof ApiError && (e.status === 405 || (e.status === 400 && /only supported|not supported/i.test(String(e.detail))))) {
      state.openInDisabled = true;
      localStorage.setItem("kiwi.openin.off", "1");
      $("open-in").hidden = true;
    }
    toast(e.message, "error");
  }
}

init();
