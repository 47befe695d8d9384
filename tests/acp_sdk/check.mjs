// Drives `kiwi acp` with the official ACP TypeScript SDK (@agentclientprotocol/sdk): a prompt
// with a permission, a cancel during a permission, a load that replays the history in a
// second process, AskUserQuestion as a form or a permission card, and ACP's newer stable surface
// (additionalDirectories, messageId, a boolean option, session/delete, logout; the turn's usage
// through the SDK's unstable entry point). Run by tests/acp_sdk.rs; prints "<n> passed, <m> failed".
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";
import * as unstable from "@agentclientprotocol/sdk/unstable";

const bin = process.env.KIWI_BIN;
const work = process.env.KIWI_WORK;
let passed = 0;
let failed = 0;

function check(name, ok, detail) {
  if (ok) {
    passed += 1;
    console.log(`ok - ${name}`);
  } else {
    failed += 1;
    console.log(`FAILED - ${name}: ${JSON.stringify(detail)}`);
  }
}

// One kiwi process and a client app around it; `onPermission` decides each permission request,
// `onElicitation` each question form.
// `sdk` is the stable entry point unless told otherwise.
function connect(onPermission, updates, args = [], onElicitation = null, sdk = { client, methods, ndJsonStream }) {
  const child = spawn(bin, ["acp", ...args], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const stream = sdk.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let app = sdk.client({ name: "kiwi-acp-check" })
    .onNotification(sdk.methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .onRequest(sdk.methods.client.session.requestPermission, async ({ params, agent }) => onPermission(params, agent));
  if (onElicitation) {
    app = app.onRequest(sdk.methods.client.elicitation.create, async ({ params }) => onElicitation(params));
  }
  return { child, stream, app };
}

const kinds = (updates) => updates.map((u) => u.update.sessionUpdate);
const text = (updates, kind) =>
  updates.filter((u) => u.update.sessionUpdate === kind).map((u) => u.update.content?.text ?? "").join("");

async function main() {
  let sessionId;
  {
    const updates = [];
    let asked = 0;
    let policy = "approve";
    const { child, stream, app } = connect(async (params, agent) => {
      asked += 1;
      check("permission options have stable ids",
        params.options.map((o) => o.optionId).join(",") === "approve,approve_for_session,reject", params.options);
      if (policy === "cancel") {
        await agent.notify(methods.agent.session.cancel, { sessionId: params.sessionId });
        return { outcome: { outcome: "cancelled" } };
      }
      return { outcome: { outcome: "selected", optionId: "approve" } };
    }, updates);
    await app.connectWith(stream, async (agent) => {
      const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      check("initialize answers protocol 1 with loadSession", init.protocolVersion === 1 && init.agentCapabilities.loadSession === true, init);
      const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [] });
      sessionId = created.sessionId;
      check("session/new offers the plan mode", created.modes.availableModes.some((m) => m.id === "plan"), created.modes);
      const first = await agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "hi" }] });
      check("prompt ends the turn", first.stopReason === "end_turn" && asked === 1, first);
      const done = updates.filter((u) => u.update.sessionUpdate === "tool_call_update" && u.update.status === "completed");
      check("the approved command ran", done.length === 1 && done[0].update.content[0].content.text === "hi\n", done);
      check("the answer streamed", text(updates, "agent_message_chunk") === "shell done", kinds(updates));
      policy = "cancel";
      const second = await agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "again" }] });
      check("cancel during a permission answers cancelled", second.stopReason === "cancelled", second);
    });
    child.kill();
  }
  {
    const updates = [];
    const { child, stream, app } = connect(async () => ({ outcome: { outcome: "cancelled" } }), updates);
    await app.connectWith(stream, async (agent) => {
      await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      const loaded = await agent.request(methods.agent.session.load, { sessionId, cwd: work, mcpServers: [] });
      check("load answers with the modes", loaded.modes?.currentModeId === "default", loaded);
      check("load replayed the user's words", text(updates, "user_message_chunk") === "hiagain", kinds(updates));
      check("load replayed the agent's words", text(updates, "agent_message_chunk") === "shell done", kinds(updates));
      check("load replayed the tool calls", kinds(updates).filter((k) => k === "tool_call").length === 2, kinds(updates));
    });
    child.kill();
  }
  {
    // Modes, session/list without a cwd, session/fork (unstable: sent by its method name). This
    // client shows a current schema (`auth`) and asks for kiwi's undo extension.
    const updates = [];
    const { child, stream, app } = connect(async () => ({ outcome: { outcome: "cancelled" } }), updates);
    await app.connectWith(stream, async (agent) => {
      const clientCapabilities = { auth: { terminal: false }, _meta: { kiwi: { extensions: ["undo"] } } };
      const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities });
      const caps = init.agentCapabilities;
      check("initialize offers sse and fork", caps.mcpCapabilities?.sse === true && caps.sessionCapabilities?.fork !== undefined, caps);
      const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [] });
      const ids = created.modes.availableModes.map((m) => m.id).join(",");
      check("four modes are offered", ids === "default,acceptEdits,plan,yolo", created.modes);
      await agent.request(methods.agent.session.setMode, { sessionId: created.sessionId, modeId: "yolo" });
      const modes = updates.filter((u) => u.update.sessionUpdate === "current_mode_update").map((u) => u.update.currentModeId);
      check("set_mode tells the client", modes.at(-1) === "yolo", modes);
      const listed = await agent.request(methods.agent.session.list, {});
      check("session/list without cwd finds the first session", listed.sessions.some((s) => s.sessionId === sessionId), listed);
      const forked = await agent.request("session/fork", { sessionId, cwd: work, mcpServers: [] });
      check("session/fork answers a new session", typeof forked.sessionId === "string" && forked.sessionId !== sessionId, forked);
      // The title follows the answer: wait for it (bounded).
      const titles = () => updates.filter((u) => u.update.sessionUpdate === "session_info_update").map((u) => u.update.title);
      for (let i = 0; i < 250 && !titles().includes("Fork: hi"); i++) await new Promise((r) => setTimeout(r, 20));
      check("the fork is titled", titles().includes("Fork: hi"), titles());
      // kiwi's `_kiwi/undo` extension method, named in the capabilities' `_meta`.
      check("initialize names the undo extension", caps._meta?.kiwi?.undo?.method === "_kiwi/undo", caps);
      let refused;
      try {
        await agent.request("_kiwi/undo", { sessionId: created.sessionId });
      } catch (e) {
        refused = e;
      }
      check("_kiwi/undo refuses a session without turns", refused?.code === -32602, String(refused));
      const undone = await agent.request("_kiwi/undo", { sessionId: forked.sessionId });
      check("_kiwi/undo takes the last turn back and says Shell is not undone",
        undone.turnsUndone === 1 && /Shell/.test(undone.message), undone);
    });
    child.kill();
  }
  {
    // AskUserQuestion: a form for a client that offers elicitation, a card for one that does not.
    const updates = [];
    const forms = [];
    const cards = [];
    const onCard = async (params) => {
      cards.push(params);
      return { outcome: { outcome: "selected", optionId: "answer_2" } };
    };
    const onForm = async (params) => {
      forms.push(params);
      return { action: "accept", content: { question_1: "Vim" } };
    };
    const args = ["--config-file", process.env.KIWI_QUESTIONS_CONFIG];
    const { child, stream, app } = connect(onCard, updates, args, onForm);
    await app.connectWith(stream, async (agent) => {
      await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: { elicitation: { form: {} } } });
      const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [] });
      const asked = await agent.request(methods.agent.session.prompt, { sessionId: created.sessionId, prompt: [{ type: "text", text: "ask" }] });
      const choices = forms[0]?.requestedSchema?.properties?.question_1?.oneOf?.map((o) => o.const).join(",");
      check("a question is a form for a client with elicitation", asked.stopReason === "end_turn" && forms.length === 1 && cards.length === 0 && choices === "Zed,Vim", forms);
      const results = updates.filter((u) => u.update.sessionUpdate === "tool_call_update" && u.update.status === "completed");
      const shown = JSON.stringify(results.map((u) => u.update.content));
      check("the form's answer is the call's result", shown.includes("Vim") && text(updates, "agent_message_chunk") === "noted", shown);
    });
    child.kill();
  }
  {
    const updates = [];
    const cards = [];
    const onCard = async (params) => {
      cards.push(params);
      return { outcome: { outcome: "selected", optionId: "answer_2" } };
    };
    const args = ["--config-file", process.env.KIWI_QUESTIONS_CONFIG];
    const { child, stream, app } = connect(onCard, updates, args);
    await app.connectWith(stream, async (agent) => {
      await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
      const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [] });
      const asked = await agent.request(methods.agent.session.prompt, { sessionId: created.sessionId, prompt: [{ type: "text", text: "ask" }] });
      const names = cards[0]?.options?.map((o) => o.name).join(",");
      check("without elicitation a question is a permission card", asked.stopReason === "end_turn" && cards.length === 1 && names === "Zed,Vim,Dismiss", cards);
    });
    child.kill();
  }
  await newerSurface(sessionId);
}

// What a client of the current schema gets beyond the basics: it says so with `auth` and
// takes boolean config options (`session.configOptions.boolean`).
async function newerSurface(firstSession) {
  const clientCapabilities = { auth: { terminal: false }, session: { configOptions: { boolean: {} } } };
  {
    const updates = [];
    const { child, stream, app } = connect(async () => ({ outcome: { outcome: "selected", optionId: "approve" } }), updates);
    await app.connectWith(stream, async (agent) => {
      const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities });
      const caps = init.agentCapabilities;
      check("initialize offers delete, additionalDirectories and logout",
        caps.sessionCapabilities?.delete && caps.sessionCapabilities?.additionalDirectories && caps.auth?.logout, caps);
      // Outside the work dir (a directory inside it is in the workspace already).
      const extra = join(process.env.HOME, "extra");
      mkdirSync(extra, { recursive: true });
      const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [], additionalDirectories: [extra] });
      const thinking = created.configOptions.find((o) => o.id === "thinking");
      check("thinking is a boolean option", thinking?.type === "boolean" && thinking.currentValue === false, thinking);
      const set = await agent.request(methods.agent.session.setConfigOption,
        { sessionId: created.sessionId, configId: "thinking", type: "boolean", value: true });
      check("set_config_option takes a boolean", set.configOptions.find((o) => o.id === "thinking")?.currentValue === true, set);
      let refused;
      try {
        await agent.request(methods.agent.session.setConfigOption, { sessionId: created.sessionId, configId: "mode", type: "boolean", value: true });
      } catch (e) {
        refused = e;
      }
      check("a boolean for a select option is refused", refused?.code === -32602, String(refused));
      const answer = await agent.request(methods.agent.session.prompt, { sessionId: created.sessionId, prompt: [{ type: "text", text: "hi" }] });
      const chunks = updates.filter((u) => u.sessionId === created.sessionId && u.update.sessionUpdate === "agent_message_chunk");
      const ids = new Set(chunks.map((u) => u.update.messageId));
      check("the answer's chunks share one messageId", answer.stopReason === "end_turn" && chunks.length > 0 && ids.size === 1 && typeof [...ids][0] === "string", chunks);
      const listed = await agent.request(methods.agent.session.list, { cwd: work });
      const shown = listed.sessions.find((s) => s.sessionId === created.sessionId);
      check("the new session is listed", shown !== undefined, listed);
      // The extra directory was saved with the session, as `--add-dir` saves it.
      const sessionsDir = join(process.env.KIMI_SHARE_DIR, "sessions");
      const state = JSON.parse(readFileSync(join(sessionsDir, workKey(), created.sessionId, "state.json"), "utf8"));
      check("additionalDirectories joined the workspace", state.additional_dirs.join(",") === extra, state.additional_dirs);

      // The first check's session: replayed with message ids, then deleted.
      updates.length = 0;
      await agent.request(methods.agent.session.load, { sessionId: firstSession, cwd: work, mcpServers: [] });
      const users = updates.filter((u) => u.update.sessionUpdate === "user_message_chunk").map((u) => u.update.messageId);
      check("replayed user messages carry their own ids", users.length === 2 && new Set(users).size === 2, users);
      const deleted = await agent.request(methods.agent.session.delete, { sessionId: firstSession });
      check("session/delete answers", deleted !== undefined, deleted);
      const after = await agent.request(methods.agent.session.list, { cwd: work });
      check("a deleted session is no longer listed", !after.sessions.some((s) => s.sessionId === firstSession), after);
      // Deleting again: kiwi answers "Resource not found", which the SDK takes as done.
      const again = await agent.request(methods.agent.session.delete, { sessionId: firstSession });
      check("deleting twice is idempotent for the SDK", again !== undefined, again);
      const out = await agent.request(methods.agent.logout, {});
      check("logout answers", out !== undefined, out);
    });
    child.kill();
  }
  {
    // The turn's usage is unstable in ACP v1: the SDK's unstable entry point parses it.
    const updates = [];
    const sdk = { client: unstable.client, methods: unstable.methods, ndJsonStream: unstable.ndJsonStream };
    const { child, stream, app } = connect(async () => ({ outcome: { outcome: "selected", optionId: "approve" } }), updates, [], null, sdk);
    await app.connectWith(stream, async (agent) => {
      await agent.request(unstable.methods.agent.initialize, { protocolVersion: 1, clientCapabilities });
      const created = await agent.request(unstable.methods.agent.session.new, { cwd: work, mcpServers: [] });
      const answer = await agent.request(unstable.methods.agent.session.prompt, { sessionId: created.sessionId, prompt: [{ type: "text", text: "hi" }] });
      const usage = answer.usage;
      check("the prompt's answer carries the turn's usage",
        usage?.inputTokens === 5 && usage.outputTokens === 2 && usage.totalTokens === 7, answer);
    });
    child.kill();
  }
}

// The session folder's name for the work dir: the md5 of its path (as kiwi and kimi name it).
function workKey() {
  return createHash("md5").update(work).digest("hex");
}

try {
  await main();
} catch (e) {
  failed += 1;
  console.log(`FAILED - exception: ${e?.stack ?? e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
