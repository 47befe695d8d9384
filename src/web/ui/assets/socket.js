// One WebSocket per open session, speaking wire 1.10 JSON-RPC (docs/web-ui.md, "The socket").
// On open it sends `initialize`; everything before `history_complete` is history; after it the
// server sends `session_status`. Lost connections are re-opened (the history is replayed again,
// so the owner resets its view on `onReset`).

import { socketUrl, uuid } from "./api.js";

const PROTOCOL_VERSION = "1.10";
const INIT_RETRY_MS = 2000;
const INIT_RETRIES = 5;
const STATUS_WAIT_MS = 15000;
const SILENCE_MS = 45000;

export class SessionSocket {
  /**
   * handlers: onReset(), onHistoryComplete(), onStatus(status), onEvent(type, payload, live),
   * onRequest(type, payload, id, live), onInitialized(result), onConnection(state, detail),
   * onForeignError(error), isWaitingOnUser() → bool (an approval/question is open).
   */
  constructor(sessionId, handlers) {
    this.sessionId = sessionId;
    this.h = handlers;
    this.ws = null;
    this.closed = false;
    this.pending = new Map(); // our request id → {resolve, reject, method}
    this.live = false;
    this.lastSeq = -1;
    this.attempt = 0;
    this.busy = false;
    this.timers = {};
    this.initTries = 0;
    this.connect();
  }

  connect() {
    if (this.closed) return;
    this.live = false;
    this.lastSeq = -1;
    this.initTries = 0;
    this.h.onReset();
    this.h.onConnection("connecting");
    const ws = new WebSocket(socketUrl(this.sessionId));
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.h.onConnection("open");
      this.initialize();
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.clearTimers();
      for (const p of this.pending.values()) p.reject(new Error("Connection closed"));
      this.pending.clear();
      if (this.closed) return;
      if (ev.code === 4004) {
        this.closed = true;
        this.h.onConnection("not_found", "Session not found");
        return;
      }
      this.attempt++;
      const wait = Math.min(10000, 500 * 2 ** Math.min(this.attempt, 5));
      this.h.onConnection("retrying", ev.reason || `connection lost (code ${ev.code})`);
      this.timers.reconnect = setTimeout(() => this.connect(), wait);
    };
  }

  clearTimers() {
    for (const t of Object.values(this.timers)) clearTimeout(t);
    this.timers = {};
  }

  close() {
    this.closed = true;
    this.clearTimers();
    if (this.ws) this.ws.close(1000, "closed by the user");
  }

  /** Drops the connection and opens a new one (used by the watchdogs). */
  reconnect(reason) {
    if (this.closed) return;
    console.info(`kiwi: reconnecting (${reason})`);
    const ws = this.ws;
    this.ws = null;
    this.clearTimers();
    if (ws) ws.close(1000, reason);
    this.connect();
  }

  async initialize() {
    try {
      const result = await this.request("initialize", {
        protocol_version: PROTOCOL_VERSION,
        client: { name: "kiwi", version: "web" },
        capabilities: { supports_question: true, supports_plan_mode: true },
        // kiwi's own commands (/fork, /undo) are listed only for a client that asks; so are a
        // running tool's output (`ToolOutput`) and what each step cost (`StatusUpdate.cost`).
        extensions: ["fork", "undo", "tool_output", "cost"],
      });
      this.h.onInitialized(result);
    } catch (err) {
      // Refused while a turn runs: try again a few times.
      if (err.code === -32000 && this.initTries < INIT_RETRIES && !this.closed) {
        this.initTries++;
        this.timers.init = setTimeout(() => this.initialize(), INIT_RETRY_MS);
      }
    }
  }

  send(message) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error("Not connected");
    this.ws.send(JSON.stringify(message));
  }

  /** Sends a JSON-RPC request; resolves with its result, rejects with {code, message}. */
  request(method, params) {
    const id = uuid();
    const msg = { jsonrpc: "2.0", method, id };
    if (params !== undefined) msg.params = params;
    return new Promise((resolve, reject) => {
      try {
        this.send(msg);
      } catch (e) {
        reject(e);
        return;
      }
      this.pending.set(id, { resolve, reject, method });
    });
  }

  /** Answers a request of the server (approval, question). */
  respond(id, result) {
    this.send({ jsonrpc: "2.0", id, result });
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      console.warn("kiwi: non-JSON frame ignored", data);
      return;
    }
    this.touch();
    if (msg.method === "history_complete") {
      this.live = true;
      this.h.onHistoryComplete();
      this.timers.status = setTimeout(() => this.reconnect("no session_status after history"), STATUS_WAIT_MS);
      return;
    }
    if (msg.method === "session_status") {
      clearTimeout(this.timers.status);
      const st = msg.params || {};
      if (typeof st.seq === "number" && st.seq <= this.lastSeq && st.state !== "error") return;
      if (typeof st.seq === "number") this.lastSeq = Math.max(this.lastSeq, st.seq);
      this.busy = st.state === "busy";
      this.h.onStatus(st);
      return;
    }
    if (msg.method === "event" && msg.params) {
      this.h.onEvent(msg.params.type, msg.params.payload || {}, this.live);
      return;
    }
    if (msg.method === "request" && msg.params) {
      this.h.onRequest(msg.params.type, msg.params.payload || {}, msg.id, this.live);
      return;
    }
    if (msg.id !== undefined && ("result" in msg || "error" in msg)) {
      const p = this.pending.get(msg.id);
      if (p) {
        this.pending.delete(msg.id);
        if (msg.error) {
          const e = new Error(msg.error.message || "error");
          e.code = msg.error.code;
          e.data = msg.error.data;
          p.reject(e);
        } else p.resolve(msg.result);
      } else if (msg.error) {
        this.h.onForeignError(msg.error);
      } else if (this.h.onForeignResult) {
        // Another page's request: a prompt's answer reaches every page.
        this.h.onForeignResult(msg.result);
      }
    }
  }

  /** Re-arms the silence watchdog: a busy session silent for 45 s is re-joined. */
  touch() {
    clearTimeout(this.timers.silence);
    this.timers.silence = setTimeout(() => {
      if (this.busy && !this.h.isWaitingOnUser()) this.reconnect("silent while busy");
      else this.touch();
    }, SILENCE_MS);
  }
}
