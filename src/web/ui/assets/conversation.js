// The conversation view: turns, steps, streamed text and thinking, tool cards (with subagent
// steps nested under their Agent card), approvals and questions, plans and status rows. It is
// fed the wire events of one session in order (history first, then live) and rebuilt from
// scratch whenever the socket reconnects (docs/web-ui.md, "The conversation").

import { h, clear, icon } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { displayBlock, outputView } from "./blocks.js";
import { uploadUrlFor } from "./api.js";

const OPEN_BY_DEFAULT = new Set(["Shell", "WriteFile", "StrReplaceFile", "Agent"]);

function toolLabel(name, args) {
  if (!args || typeof args !== "object") return "";
  const pick = (...keys) => keys.map((k) => args[k]).find((v) => typeof v === "string" && v);
  switch (name) {
    case "Shell":
      return pick("command") || "";
    case "ReadFile":
    case "WriteFile":
    case "StrReplaceFile":
    case "ReadMediaFile":
      return pick("path") || "";
    case "Glob":
    case "Grep":
      return pick("pattern") || "";
    case "FetchURL":
      return pick("url") || "";
    case "SearchWeb":
      return pick("query") || "";
    case "Agent":
      return [pick("subagent_type"), pick("description")].filter(Boolean).join(": ");
    case "SetTodoList":
      return Array.isArray(args.todos) ? `${args.todos.length} items` : "read";
    default:
      return pick("description", "path", "query", "command", "url", "name", "title") || "";
  }
}

function parseArgs(text) {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    // Still streaming: pull out what can be read so the label shows early.
    const m = /"(command|path|pattern|url|query|description)"\s*:\s*"((?:\\.|[^"\\])*)/.exec(text);
    if (!m) return null;
    try {
      return { [m[1]]: JSON.parse(`"${m[2]}"`) };
    } catch {
      return null;
    }
  }
}

/** The user's input split into its text and its attachments (the upload blocks kiwi adds). */
export function splitUserInput(input) {
  if (typeof input === "string") return { text: input, attachments: [] };
  const parts = Array.isArray(input) ? input : [];
  const texts = [];
  const attachments = [];
  let skipUntil = null;
  for (const p of parts) {
    if (skipUntil) {
      if (p.type === "text" && p.text.trim() === skipUntil) skipUntil = null;
      continue;
    }
    if (p.type === "text") {
      const t = p.text;
      if (t.startsWith("<uploaded_files>")) {
        for (const line of t.split("\n")) {
          const m = /^\d+\.\s+(.+)$/.exec(line.trim());
          if (m) attachments.push({ kind: "file", path: m[1] });
        }
        continue;
      }
      const tag = /^<(image|video|document) path="([^"]*)" content_type="([^"]*)">$/.exec(t.trim());
      if (tag) {
        const [, kind, path, type] = tag;
        const known = attachments.find((a) => a.path === path);
        if (known) Object.assign(known, { kind, type });
        else attachments.push({ kind, path, type });
        skipUntil = `</${kind}>`;
        continue;
      }
      texts.push(t);
    } else if (p.type === "image_url" && p.image_url) {
      attachments.push({ kind: "image", url: p.image_url.url });
    } else if (p.type === "video_url" && p.video_url) {
      attachments.push({ kind: "video", url: p.video_url.url });
    } else if (p.type === "audio_url" && p.audio_url) {
      attachments.push({ kind: "audio", url: p.audio_url.url });
    }
  }
  return { text: texts.join(""), attachments };
}

function attachmentView(a) {
  const url = a.url && /^(https?:|data:)/.test(a.url) ? a.url : a.path ? uploadUrlFor(a.path) : null;
  const name = a.path ? a.path.split("/").pop() : a.kind;
  if (a.kind === "image" && url) return h("a", { class: "attach-media", href: url, target: "_blank", rel: "noopener" }, h("img", { src: url, alt: name, loading: "lazy" }));
  if (a.kind === "video" && url) return h("video", { class: "attach-media", src: url, controls: true, preload: "metadata" });
  const chip = h("span", { class: "chip" }, icon("clip"), name);
  return url ? h("a", { class: "chip-link", href: url, target: "_blank", rel: "noopener" }, chip) : chip;
}

// ------------------------------------------------------------------ tool card

/** Characters of a running command's output kept on screen. */
const LIVE_OUTPUT_MAX = 20000;

/** The note an approval answer puts on its tool card: [text, kind]. */
function decisionNote(answer) {
  const words = { approve: "Approved", approve_for_session: "Approved for this session", reject: "Rejected" };
  const text = `${words[answer.response] || answer.response}${answer.feedback ? `: ${answer.feedback}` : ""}`;
  return [text, answer.response === "reject" ? "rejected" : "approved"];
}

class ToolCard {
  constructor(stream, call) {
    this.stream = stream;
    this.id = call.id;
    this.name = (call.function && call.function.name) || "tool";
    this.args = (call.function && call.function.arguments) || "";
    this.state = "running";
    this.sub = null;
    this.labelEl = h("span", { class: "tool-label" });
    this.stateEl = h("span", { class: "tool-state" });
    this.argsEl = h("pre", { class: "tool-args" });
    this.resultEl = h("div", { class: "tool-result" });
    this.noteEl = h("div", { class: "tool-notes" });
    this.body = h("div", { class: "tool-body" }, h("details", { class: "args-details" }, h("summary", { text: "Arguments" }), this.argsEl), this.noteEl, this.resultEl);
    this.head = h(
      "button",
      { type: "button", class: "tool-head", "aria-expanded": "false", onclick: () => this.toggle() },
      h("span", { class: "tool-icon", "aria-hidden": "true" }),
      h("span", { class: "tool-name", text: this.name }),
      this.labelEl,
      this.stateEl,
    );
    this.el = h("div", { class: "tool", dataset: { tool: this.name, callId: this.id } }, this.head, this.body);
    if (this.name === "Agent") {
      this.sub = new Stream(h("div", { class: "subagent" }), stream.conv, stream.depth + 1);
      this.body.insertBefore(this.sub.container, this.resultEl);
    }
    this.setOpen(OPEN_BY_DEFAULT.has(this.name));
    this.setState("running");
    this.updateArgs();
    // A call id is only unique within a turn: the server's marks name calls by turn and id.
    this.turnIndex = stream.conv.turn ? stream.conv.turn.index : -1;
    this.liveEl = null;
    this.started = Date.now();
    this.tick = setInterval(() => this.elapsed(), 1000);
  }

  /** The running time, shown while the tool runs (a Shell command can take a while). */
  elapsed() {
    if (this.state !== "running" && this.state !== "waiting") {
      clearInterval(this.tick);
      return;
    }
    if (!this.stream.conv.live) return;
    const s = Math.floor((Date.now() - this.started) / 1000);
    if (this.state === "running" && s >= 1) this.stateEl.textContent = `running · ${s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${s % 60}s`}`;
  }

  toggle() {
    this.setOpen(!this.open);
  }

  setOpen(open) {
    this.open = open;
    this.el.classList.toggle("open", open);
    this.head.setAttribute("aria-expanded", String(open));
  }

  appendArgs(part) {
    if (typeof part === "string") {
      this.args += part;
      this.updateArgs();
    }
  }

  updateArgs() {
    const parsed = parseArgs(this.args);
    this.argsEl.textContent = parsed && this.args && !this.args.trim().startsWith("{") ? this.args : pretty(this.args);
    const label = toolLabel(this.name, parsed);
    this.labelEl.textContent = label.length > 160 ? `${label.slice(0, 160)}…` : label;
    this.labelEl.title = label;
    if (this.name === "Shell" && parsed && typeof parsed.command === "string" && this.state === "running") {
      this.resultEl.replaceChildren(displayBlock({ type: "shell", language: "bash", command: parsed.command }));
      if (this.liveEl) this.resultEl.appendChild(this.liveEl);
    }
  }

  setState(state, text) {
    this.state = state;
    this.el.dataset.state = state;
    const labels = { running: "running", waiting: "needs approval", ok: "done", error: "error", interrupted: "interrupted" };
    this.stateEl.textContent = text || labels[state] || state;
  }

  note(text, kind) {
    this.noteEl.appendChild(h("div", { class: `tool-note ${kind || ""}`, text }));
  }

  /** Output of the running command so far (`ToolOutput`, kiwi's `tool_output` extension); the
   * result replaces it. Only the last LIVE_OUTPUT_MAX characters are kept on screen. */
  liveOutput(text) {
    if (this.state !== "running" && this.state !== "waiting") return;
    if (!this.liveEl) {
      this.liveEl = h("pre", { class: "tool-output live-output", "aria-live": "off" });
      this.resultEl.appendChild(this.liveEl);
    }
    const all = this.liveEl.textContent + text;
    this.liveEl.textContent = all.length > LIVE_OUTPUT_MAX ? `…${all.slice(all.length - LIVE_OUTPUT_MAX)}` : all;
    this.liveEl.scrollTop = this.liveEl.scrollHeight;
    if (this.stream.conv.stick) this.stream.conv.scrollToBottom();
  }

  result(rv) {
    const value = rv || {};
    clear(this.resultEl);
    this.liveEl = null;
    const display = Array.isArray(value.display) ? value.display : [];
    const brief = display.find((b) => b.type === "brief");
    if (this.name === "Shell") {
      const parsed = parseArgs(this.args);
      if (parsed && parsed.command && !display.some((b) => b.type === "shell")) this.resultEl.appendChild(displayBlock({ type: "shell", language: "bash", command: parsed.command }));
    }
    for (const block of display) if (block.type !== "brief") this.resultEl.appendChild(displayBlock(block));
    const out = outputView(value.output);
    if (out) this.resultEl.appendChild(out);
    if (value.message) this.resultEl.appendChild(h("div", { class: value.is_error ? "tool-message error" : "tool-message", text: value.message }));
    this.setState(value.is_error ? "error" : "ok", brief ? brief.text : undefined);
    if (value.is_error) this.setOpen(true);
    for (const block of display) if (block.type === "todo" && this.stream.depth === 0) this.stream.conv.opts.onTodos(block.items || []);
  }
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text || "";
  }
}

// ------------------------------------------------------------------ stream of steps

class Stream {
  constructor(container, conv, depth) {
    this.container = container;
    this.conv = conv;
    this.depth = depth;
    this.tools = new Map();
    this.step = null;
    this.block = null; // {kind, text, el, body}
    this.lastCall = null;
    this.retryRow = null;
  }

  ensureStep() {
    if (!this.step) this.beginStep(null);
    return this.step;
  }

  beginStep(n) {
    this.step = h("div", { class: "step", dataset: n ? { n } : {} });
    this.container.appendChild(this.step);
    this.block = null;
    this.lastCall = null;
  }

  row(text, kind) {
    const el = h("div", { class: `status-row ${kind || ""}`, text });
    (this.step || this.container).appendChild(el);
    return el;
  }

  content(part) {
    if (this.retryRow) {
      this.retryRow.remove();
      this.retryRow = null;
    }
    const step = this.ensureStep();
    if (part.type === "text" || part.type === "think") {
      const kind = part.type;
      const piece = kind === "text" ? part.text : part.think;
      if (!this.block || this.block.kind !== kind) {
        if (this.block && this.block.kind === "think" && this.block.autoOpen) this.block.el.open = false;
        this.block = this.newBlock(kind);
        step.appendChild(this.block.el);
      }
      this.block.text += piece || "";
      this.conv.markDirty(this.block);
      return;
    }
    this.block = null;
    const media = part.image_url || part.video_url || part.audio_url;
    if (media && typeof media.url === "string" && /^(https?:|data:)/.test(media.url)) {
      const tag = part.type === "image_url" ? "img" : part.type === "video_url" ? "video" : "audio";
      step.appendChild(h(tag, { class: "media", src: media.url, controls: tag !== "img", alt: tag === "img" ? "image" : null }));
    }
  }

  newBlock(kind) {
    if (kind === "think") {
      const body = h("div", { class: "md think-body" });
      const live = this.conv.live;
      const el = h("details", { class: "think", open: live }, h("summary", null, h("span", { class: "think-label", text: "Thinking" })), body);
      return { kind, text: "", el, body, autoOpen: live };
    }
    const body = h("div", { class: "md answer" });
    return { kind, text: "", el: body, body };
  }

  toolCall(call) {
    const step = this.ensureStep();
    this.block = null;
    const card = new ToolCard(this, call);
    this.tools.set(card.id, card);
    this.conv.registerTool(card);
    this.lastCall = card;
    step.appendChild(card.el);
  }

  handle(type, p) {
    switch (type) {
      case "StepBegin":
        this.beginStep(p.n);
        return true;
      case "ContentPart":
        this.content(p);
        return true;
      case "ToolCall":
        this.toolCall(p);
        return true;
      case "ToolCallPart":
        if (this.lastCall) this.lastCall.appendArgs(p.arguments_part);
        return true;
      case "ToolOutput": {
        const card = this.tools.get(p.tool_call_id);
        if (card) card.liveOutput(typeof p.text === "string" ? p.text : "");
        return true;
      }
      case "ToolResult": {
        const card = this.tools.get(p.tool_call_id);
        if (card) card.result(p.return_value);
        this.conv.toolFinished(p.tool_call_id);
        return true;
      }
      case "StepRetry": {
        // The failed attempt's partial output is discarded.
        if (this.step) {
          for (const card of this.tools.values()) if (this.step.contains(card.el)) this.tools.delete(card.id);
          clear(this.step);
        }
        this.block = null;
        this.lastCall = null;
        const code = p.status_code ? ` ${p.status_code}` : "";
        const wait = typeof p.wait_s === "number" ? ` · waiting ${p.wait_s.toFixed(1)} s` : "";
        this.retryRow = this.row(`Retrying after ${p.error_type || "error"}${code} · attempt ${p.next_attempt}/${p.max_attempts}${wait}`, "retry");
        return true;
      }
      case "StepInterrupted":
        this.interruptRunning();
        this.row("Step interrupted", "warn");
        return true;
      case "SubagentEvent": {
        const card = this.tools.get(p.parent_tool_call_id) || this.conv.findTool(p.parent_tool_call_id);
        const ev = p.event || {};
        if (card && card.sub) {
          if (p.subagent_type && !card.subBadge) {
            card.subBadge = h("span", { class: "badge", text: `${p.subagent_type}${p.agent_id ? ` · ${p.agent_id}` : ""}` });
            card.sub.container.prepend(card.subBadge);
          }
          card.sub.handleSub(ev.type, ev.payload || {});
        }
        return true;
      }
      case "PlanDisplay":
        this.block = null;
        this.ensureStep().appendChild(
          h("div", { class: "plan" }, h("div", { class: "plan-head" }, h("strong", { text: "Plan" }), h("code", { class: "muted", text: p.file_path || "" })), h("div", { class: "md", html: renderMarkdown(p.content || "") })),
        );
        return true;
      case "Notification":
        this.container.appendChild(
          h("details", { class: `notice sev-${p.severity || "info"}` }, h("summary", { text: p.title || p.type || "Notification" }), h("pre", { text: p.body || "" })),
        );
        return true;
      case "CompactionBegin":
        this.compactRow = this.row("Compacting context…", "busy");
        return true;
      case "CompactionEnd":
        if (this.compactRow) this.compactRow.textContent = "Context compacted";
        this.compactRow = null;
        return true;
      case "MCPLoadingBegin":
        this.mcpRow = this.row("Connecting MCP servers…", "busy");
        return true;
      case "MCPLoadingEnd":
        if (this.mcpRow) this.mcpRow.remove();
        this.mcpRow = null;
        return true;
      case "HookResolved":
        if (p.action === "block") this.row(`Hook ${p.event} blocked${p.target ? ` (${p.target})` : ""}${p.reason ? `: ${p.reason}` : ""}`, "warn");
        return true;
      case "HookTriggered":
        return true;
      default:
        return false;
    }
  }

  /** Events of a subagent (inside its Agent card). */
  handleSub(type, p) {
    if (this.handle(type, p)) return;
    if (type === "TurnBegin") {
      const { text } = splitUserInput(p.user_input);
      this.container.appendChild(h("details", { class: "sub-prompt" }, h("summary", { text: "Task prompt" }), h("div", { class: "user-text", text })));
      this.step = null;
    } else if (type === "TurnEnd") {
      this.step = null;
      this.block = null;
    }
  }

  interruptRunning() {
    for (const card of this.tools.values()) {
      if (card.state === "running" || card.state === "waiting") card.setState("interrupted");
      if (card.sub) card.sub.interruptRunning();
    }
  }
}

// ------------------------------------------------------------------ conversation

export class Conversation {
  /**
   * opts: onFork(turnIndex), respond(id, result), onTodos(items), onStatusUpdate(payload),
   * onPlanMode(bool), onRequestsChanged(count)
   */
  constructor(root, requestsEl, opts) {
    this.root = root;
    this.requestsEl = requestsEl;
    this.opts = opts;
    // Follow new output while the reader is at the bottom; scrolling up stops following.
    this.stick = true;
    this.autoTop = 0;
    root.addEventListener(
      "scroll",
      () => {
        if (this.nearBottom()) this.stick = true;
        else if (root.scrollTop < this.autoTop - 4) this.stick = false;
      },
      { passive: true },
    );
    this.reset();
  }

  reset() {
    clear(this.root);
    clear(this.requestsEl);
    this.turns = [];
    this.turnCount = 0;
    this.turn = null;
    this.loose = null;
    this.live = false;
    this.dirty = new Set();
    this.allTools = new Map();
    this.requests = new Map(); // id → {type, payload, el}
    this.historyQuestions = new Map();
    this.finishedTools = new Set();
    this.empty = h("div", { class: "empty-state" }, h("p", { text: "No messages yet." }), h("p", { class: "muted", text: "Type a prompt below to start." }));
    this.root.appendChild(this.empty);
    this.opts.onRequestsChanged(0);
  }

  markDirty(block) {
    this.dirty.add(block);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = null;
    for (const b of this.dirty) {
      b.body.innerHTML = renderMarkdown(b.text);
      if (b.kind === "think") b.el.querySelector(".think-label").textContent = this.turn && this.turn.stream.block === b && this.streaming ? "Thinking…" : "Thinking";
    }
    this.dirty.clear();
    if (this.stick) this.scrollToBottom();
  }

  nearBottom() {
    const s = this.root;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }

  scrollToBottom() {
    this.root.scrollTop = this.root.scrollHeight;
    this.autoTop = this.root.scrollTop;
    this.stick = true;
  }

  registerTool(card) {
    const list = this.allTools.get(card.id) || [];
    list.push(card);
    this.allTools.set(card.id, list);
  }

  findTool(id) {
    const list = this.allTools.get(id);
    return list ? list[list.length - 1] : null;
  }

  toolFinished(id) {
    this.finishedTools.add(id);
  }

  setLive(live) {
    this.live = live;
    if (live) {
      // Questions replayed from history are still open if their tool has no result yet.
      for (const [id, q] of this.historyQuestions) if (!this.finishedTools.has(q.payload.tool_call_id)) this.showRequest("QuestionRequest", q.payload, id);
      this.historyQuestions.clear();
      this.flush();
      this.scrollToBottom();
    }
  }

  set streaming(v) {
    this._streaming = v;
    this.root.classList.toggle("streaming", v);
  }

  get streaming() {
    return !!this._streaming;
  }

  /** Where events outside any turn go. */
  outside() {
    if (!this.loose) {
      this.loose = new Stream(h("div", { class: "loose" }), this, 0);
      this.root.appendChild(this.loose.container);
    }
    return this.loose;
  }

  event(type, p) {
    if (this.empty) {
      this.empty.remove();
      this.empty = null;
    }
    this.dispatch(type, p);
    if (this.stick && this.live) this.scrollToBottom();
  }

  dispatch(type, p) {
    switch (type) {
      case "TurnBegin":
        this.beginTurn(p.user_input);
        return;
      case "TurnEnd":
        this.endTurn();
        return;
      case "SteerInput":
        this.userBubble(p.user_input, (this.turn ? this.turn.stream : this.outside()).container, null, "steer");
        if (this.turn) this.turn.stream.step = null;
        return;
      case "StatusUpdate":
        this.opts.onStatusUpdate(p);
        if (typeof p.plan_mode === "boolean") this.opts.onPlanMode(p.plan_mode);
        return;
      case "ApprovalResponse":
        this.closeRequest(p.request_id, p);
        return;
      case "SessionNotice":
        this.outsideRow(p.text || "Session notice", "notice-row");
        return;
      default:
        break;
    }
    const stream = this.turn ? this.turn.stream : this.outside();
    if (!stream.handle(type, p)) {
      // An event this UI does not know: shown compactly rather than dropped.
      stream.row(`${type}`, "muted");
    }
  }

  outsideRow(text, kind) {
    const target = this.turn ? this.turn.stream : this.outside();
    target.row(text, kind);
  }

  beginTurn(input) {
    this.closeTurn();
    this.loose = null;
    const index = this.turnCount++;
    const el = h("section", { class: "turn", dataset: { turn: index } });
    this.root.appendChild(el);
    const { text } = splitUserInput(input);
    const clearing = /^\/(clear|reset)\s*$/.test(text.trim());
    const undo = /^\/undo(?:\s+(\d+))?\s*$/.exec(text.trim());
    this.userBubble(input, el, index);
    const stream = new Stream(h("div", { class: "assistant" }), this, 0);
    el.appendChild(stream.container);
    this.turn = { index, el, stream, clearing, undo: undo ? Number(undo[1] || 1) : 0 };
    this.turns.push(this.turn);
  }

  userBubble(input, parent, index, kind) {
    const { text, attachments } = splitUserInput(input);
    const actions = h("div", { class: "msg-actions" });
    if (index !== null && index !== undefined) {
      actions.appendChild(h("button", { type: "button", class: "link-btn", title: "Start a new session from the conversation up to this message", onclick: () => this.opts.onFork(index) }, "Fork"));
    }
    actions.appendChild(
      h("button", { type: "button", class: "link-btn", onclick: () => navigator.clipboard && navigator.clipboard.writeText(text) }, "Copy"),
    );
    const bubble = h(
      "div",
      { class: `user-wrap ${kind || ""}` },
      h(
        "div",
        { class: "user-msg" },
        kind === "steer" ? h("span", { class: "badge", text: "steered" }) : null,
        attachments.length ? h("div", { class: "attachments" }, attachments.map(attachmentView)) : null,
        text ? h("div", { class: "user-text", text }) : null,
      ),
      actions,
    );
    parent.appendChild(bubble);
    return bubble;
  }

  endTurn() {
    if (!this.turn) return;
    const turn = this.turn;
    this.flush();
    if (turn.clearing) {
      // `/clear`: earlier messages leave the view.
      for (const t of this.turns) if (t !== turn) t.el.remove();
      this.turns = [turn];
    }
    if (turn.undo && !turn.el.querySelector(".error-row") && !/nothing was undone|nothing to undo|cannot undo|out of range|cannot be undone/i.test(turn.el.textContent)) {
      // `/undo [N]`: the turns it took back leave the view at once, as they left the session's
      // record (which keeps neither them nor the `/undo` turn: a reload shows the same).
      const kept = this.turns.filter((t) => t !== turn);
      const left = Math.max(0, kept.length - turn.undo);
      for (const t of kept.slice(left)) t.el.remove();
      this.turns = [...kept.slice(0, left), turn];
      // Later turns are numbered as the record numbers them (fork counts on it).
      this.turnCount = Math.max(0, this.turnCount - Math.min(turn.undo, kept.length) - 1);
      turn.el.querySelectorAll(".msg-actions button").forEach((b) => b.textContent === "Fork" && b.remove());
    }
    this.closeTurn();
  }

  closeTurn() {
    if (!this.turn) return;
    const s = this.turn.stream;
    if (s.block && s.block.kind === "think" && s.block.autoOpen) s.block.el.open = false;
    if (s.retryRow) s.retryRow.remove();
    this.turn = null;
  }

  /** The session went idle or stopped: nothing streams any more. */
  settle() {
    this.streaming = false;
    if (this.turn) this.turn.stream.interruptRunning();
    for (const t of this.turns) t.stream.interruptRunning();
    this.closeTurn();
    for (const [id, r] of [...this.requests]) {
      if (r.type === "QuestionRequest" || (r.type === "ApprovalRequest" && r.payload.source_kind !== "background_agent")) this.closeRequest(id);
    }
    this.flush();
  }

  addNote(text) {
    const target = this.turns.length ? this.turns[this.turns.length - 1].stream : this.outside();
    target.container.appendChild(h("div", { class: "status-row", text }));
  }

  /** The last turn was stopped (by this page or another, live). */
  markStopped() {
    this.stoppedNote(this.turns[this.turns.length - 1]);
  }

  stoppedNote(turn) {
    if (!turn || turn.el.querySelector(".stopped-note")) return;
    turn.stream.container.appendChild(h("div", { class: "status-row stopped-note", text: "Stopped." }));
  }

  /** What the session's record keeps beside the history (`GET …/kiwi-marks`): the answered
   * approvals and the stopped turns, so a reload and every other tab show them too. */
  applyMarks(marks) {
    const byIndex = new Map(this.turns.map((t) => [t.index, t]));
    for (const index of (marks && marks.stopped) || []) this.stoppedNote(byIndex.get(index));
    for (const a of (marks && marks.approvals) || []) {
      const turn = byIndex.get(a.turn_index);
      const card = turn && [...turn.el.querySelectorAll(".tool")].map((el) => this.cardOf(el)).find((c) => c && c.id === a.tool_call_id);
      if (card && !card.noteEl.querySelector(".tool-note")) card.note(...decisionNote(a));
    }
    if (this.stick) this.scrollToBottom();
  }

  cardOf(el) {
    for (const t of this.turns) {
      const walk = (stream) => {
        for (const card of stream.tools.values()) {
          if (card.el === el) return card;
          if (card.sub) {
            const found = walk(card.sub);
            if (found) return found;
          }
        }
        return null;
      };
      const found = walk(t.stream);
      if (found) return found;
    }
    return null;
  }

  addError(text) {
    const target = this.turns.length ? this.turns[this.turns.length - 1].stream : this.outside();
    target.container.appendChild(h("div", { class: "error-row", role: "alert", text }));
    this.scrollToBottom();
  }

  // -------------------------------------------------------------- requests

  request(type, payload, id, live) {
    if (!live) {
      if (type === "QuestionRequest") this.historyQuestions.set(id, { payload });
      return;
    }
    if (type === "ApprovalRequest" || type === "QuestionRequest") this.showRequest(type, payload, id);
    // Hook and external-tool requests are never subscribed to by this UI.
  }

  showRequest(type, payload, id) {
    if (this.requests.has(id)) return;
    const el = type === "ApprovalRequest" ? this.approvalCard(payload, id) : this.questionCard(payload, id);
    this.requests.set(id, { type, payload, el });
    this.requestsEl.appendChild(el);
    if (type === "ApprovalRequest") {
      const card = this.findTool(payload.tool_call_id);
      if (card) card.setState("waiting");
    }
    this.opts.onRequestsChanged(this.requests.size);
    const first = el.querySelector("button.primary");
    if (first && !document.activeElement?.closest(".composer")) first.focus({ preventScroll: true });
  }

  closeRequest(id, response) {
    const r = this.requests.get(id);
    if (r) {
      r.el.remove();
      this.requests.delete(id);
      this.opts.onRequestsChanged(this.requests.size);
    }
    if (response) {
      const toolId = r ? r.payload.tool_call_id : null;
      const card = toolId ? this.findTool(toolId) : null;
      // An answer after its turn ended is the stop's reject: "Stopped." says it (as after a reload).
      const ended = !this.turn || this.turn.index !== card?.turnIndex;
      if (card && !ended) {
        card.note(...decisionNote(response));
        if (card.state === "waiting") card.setState("running");
      }
    }
  }

  approvalCard(p, id) {
    const feedback = h("textarea", { rows: 2, placeholder: "Tell the agent what to do instead", "aria-label": "Feedback" });
    const feedbackRow = h("div", { class: "feedback-row", hidden: true }, feedback, h("button", { type: "button", onclick: () => send("reject", feedback.value.trim()) }, "Send rejection"));
    const buttons = [];
    const send = (response, fb) => {
      const result = { request_id: id, response };
      if (fb) result.feedback = fb;
      try {
        this.opts.respond(id, result);
        buttons.forEach((b) => (b.disabled = true));
        el.classList.add("answered");
      } catch (e) {
        el.appendChild(h("div", { class: "error-row", text: `Could not send: ${e.message}` }));
      }
    };
    const btn = (label, cls, fn) => {
      const b = h("button", { type: "button", class: cls, onclick: fn }, label);
      buttons.push(b);
      return b;
    };
    const who = p.agent_id ? h("span", { class: "badge", text: `subagent ${p.subagent_type || ""} ${p.agent_id}`.trim() }) : null;
    const bg = p.source_kind === "background_agent" ? h("span", { class: "badge", text: `background ${p.source_id || ""}` }) : null;
    const el = h(
      "div",
      { class: "request approval", role: "group", "aria-label": "Approval request", dataset: { requestId: id } },
      h("div", { class: "request-head" }, h("strong", { text: `${p.sender || "Tool"}: ${p.action || "action"}` }), who, bg),
      p.description ? h("div", { class: "request-desc", text: p.description }) : null,
      h("div", { class: "request-display" }, (p.display || []).map(displayBlock)),
      h(
        "div",
        { class: "request-actions" },
        btn("Approve", "primary", () => send("approve")),
        btn("Approve for session", "", () => send("approve_for_session")),
        btn("Reject", "danger", () => send("reject")),
        btn("Reject with feedback…", "", () => {
          feedbackRow.hidden = false;
          feedback.focus();
        }),
      ),
      feedbackRow,
    );
    return el;
  }

  questionCard(p, id) {
    const questions = Array.isArray(p.questions) ? p.questions : [];
    const getters = [];
    const blocks = questions.map((q, qi) => {
      const name = `q-${id}-${qi}`;
      const type = q.multi_select ? "checkbox" : "radio";
      const other = h("input", { type: "text", class: "other-text", placeholder: q.other_description || "Your answer", "aria-label": q.other_label || "Other" });
      const otherChoice = h("input", { type, name, value: "__other__" });
      other.addEventListener("input", () => (otherChoice.checked = other.value.trim() !== "" || otherChoice.checked));
      const opts = (q.options || []).map((o) =>
        h("label", { class: "option" }, h("input", { type, name, value: o.label }), h("span", { class: "option-label", text: o.label }), o.description ? h("span", { class: "muted option-desc", text: o.description }) : null),
      );
      getters.push(() => {
        const chosen = [...el.querySelectorAll(`input[name="${CSS.escape(name)}"]:checked`)].map((i) => (i.value === "__other__" ? other.value.trim() : i.value)).filter(Boolean);
        return [q.question, chosen.join(", ")];
      });
      return h(
        "fieldset",
        { class: "question" },
        h("legend", null, q.header ? h("span", { class: "badge", text: q.header }) : null, " ", h("span", { text: q.question })),
        q.body ? h("div", { class: "md", html: renderMarkdown(q.body) }) : null,
        opts,
        h("label", { class: "option other" }, otherChoice, h("span", { class: "option-label", text: q.other_label || "Other" }), other),
      );
    });
    const send = (answers) => {
      try {
        this.opts.respond(id, { request_id: id, answers });
        el.classList.add("answered");
        el.querySelectorAll("button").forEach((b) => (b.disabled = true));
      } catch (e) {
        el.appendChild(h("div", { class: "error-row", text: `Could not send: ${e.message}` }));
      }
    };
    const el = h(
      "form",
      {
        class: "request question-card",
        "aria-label": "Question",
        dataset: { requestId: id },
        onsubmit: (e) => {
          e.preventDefault();
          const answers = {};
          for (const g of getters) {
            const [q, a] = g();
            if (a) answers[q] = a;
          }
          send(answers);
        },
      },
      h("div", { class: "request-head" }, h("strong", { text: questions.length > 1 ? "The agent has questions" : "The agent has a question" })),
      blocks,
      h("div", { class: "request-actions" }, h("button", { type: "submit", class: "primary" }, "Answer"), h("button", { type: "button", onclick: () => send({}) }, "Dismiss")),
    );
    return el;
  }

  // -------------------------------------------------------------- search

  search(query) {
    this.root.querySelectorAll(".hit").forEach((e) => e.classList.remove("hit", "hit-current"));
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const hits = [...this.root.querySelectorAll(".user-text, .md.answer, .think-body, .tool-output")].filter((e) => e.textContent.toLowerCase().includes(q));
    hits.forEach((e) => e.classList.add("hit"));
    return hits;
  }
}
