// Drives `kiwi acp` with the older published ACP SDK, @zed-industries/agent-client-protocol 0.4:
// a prompt whose command asks for permission (approved), a second whose permission is answered by
// a cancel, and the updates of both. That SDK checks every message against its own schema and
// reports one it cannot parse on stderr ("Error handling notification/request"); any such report
// is a failure, so kiwi must send this client nothing newer than it announced. Run by
// tests/suite/acp_sdk.rs; prints "<n> passed, <m> failed".
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { ClientSideConnection, ndJsonStream } from "@zed-industries/agent-client-protocol";

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

// What the SDK could not parse: it says so through console.error.
const rejected = [];
const originalError = console.error;
console.error = (...args) => {
  rejected.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  originalError(...args);
};

const updates = [];
let permissions = 0;
let onPermission = async () => ({ outcome: { outcome: "selected", optionId: "approve" } });

const child = spawn(bin, ["acp"], { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const connection = new ClientSideConnection(
  () => ({
    async sessionUpdate(params) {
      updates.push(params.update);
    },
    async requestPermission(params) {
      permissions += 1;
      return onPermission(params);
    },
    async readTextFile() {
      throw new Error("not offered");
    },
    async writeTextFile() {
      throw new Error("not offered");
    },
  }),
  stream,
);

const kinds = () => updates.map((u) => u.sessionUpdate);
const settle = () => new Promise((r) => setTimeout(r, 300));

try {
  const init = await connection.initialize({
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  check("initialize answers protocol 1", init.protocolVersion === 1, init);
  check("no kiwi extension is named to a client that did not ask", init.agentCapabilities?._meta === undefined, init);
  const created = await connection.newSession({ cwd: work, mcpServers: [] });
  check("session/new answers a session id", typeof created.sessionId === "string", created);
  const first = await connection.prompt({ sessionId: created.sessionId, prompt: [{ type: "text", text: "run it" }] });
  check("the approved prompt ends its turn", first.stopReason === "end_turn", first);
  check("the command asked for permission once", permissions === 1, permissions);
  check("the approved command's result arrived",
    updates.some((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed"), kinds());
  onPermission = async (params) => {
    await connection.cancel({ sessionId: params.sessionId });
    return { outcome: { outcome: "cancelled" } };
  };
  const second = await connection.prompt({ sessionId: created.sessionId, prompt: [{ type: "text", text: "again" }] });
  check("a cancel during a permission ends the turn as cancelled", second.stopReason === "cancelled", second);
  await settle();
  const known = new Set(["user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call",
    "tool_call_update", "plan", "available_commands_update", "current_mode_update"]);
  check("every update is of a kind this SDK knows", kinds().every((k) => known.has(k)), kinds());
  check("the commands were announced", kinds().includes("available_commands_update"), kinds());
  check("the SDK parsed every message kiwi sent", rejected.length === 0, rejected);
} catch (e) {
  check("the session ran without an error", false, String(e?.stack ?? e));
}
child.kill();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
