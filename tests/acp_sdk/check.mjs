// Drives `kiwi acp` with the official ACP TypeScript SDK (@agentclientprotocol/sdk): a prompt
// with a permission, a cancel during a permission, a load that replays the history in a
// second process, and AskUserQuestion as a form or a permission card. Run by tests/acp_sdk.rs; prints "<n> passed, <m> failed".
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

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
function connect(onPermission, updates, args = [], onElicitation = null) {
  const child = spawn(bin, ["acp", ...args], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  let app = client({ name: "kiwi-acp-check" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .onRequest(methods.client.session.requestPermission, async ({ params, agent }) => onPermission(params, agent));
  if (onElicitation) {
    app = app.onRequest(methods.client.elicitation.create, async ({ params }) => onElicitation(params));
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
}

try {
  await main();
} catch (e) {
  failed += 1;
  console.log(`FAILED - exception: ${e?.stack ?? e}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
