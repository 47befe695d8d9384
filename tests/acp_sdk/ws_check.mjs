// Drives `kiwi web`'s `/api/acp` WebSocket with the official ACP TypeScript SDK
// (@agentclientprotocol/sdk): the SDK's ndJsonStream over web streams adapted to a WebSocket (one
// message per frame), a session made there, a prompt answered, the session listed by the REST
// API. Run by tests/suite/web_acp.rs with Node's WebSocket; prints "<n> passed, <m> failed".
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const url = process.env.KIWI_ACP_URL;
const api = process.env.KIWI_API;
const token = process.env.KIWI_TOKEN;
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

// The SDK reads and writes newline-delimited JSON bytes: each frame in becomes a line, each line
// out becomes a frame.
function socketStream(address) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(address);
    ws.onerror = (e) => reject(new Error(`WebSocket error: ${e.message ?? e.type}`));
    ws.onopen = () => {
      const encoder = new TextEncoder();
      const decoder = new TextDecoder();
      const readable = new ReadableStream({
        start(controller) {
          ws.onmessage = (m) => controller.enqueue(encoder.encode(`${m.data}\n`));
          ws.onclose = () => {
            try {
              controller.close();
            } catch {}
          };
        },
      });
      let pending = "";
      const writable = new WritableStream({
        write(chunk) {
          pending += decoder.decode(chunk, { stream: true });
          let end;
          while ((end = pending.indexOf("\n")) >= 0) {
            const line = pending.slice(0, end);
            pending = pending.slice(end + 1);
            if (line.trim()) ws.send(line);
          }
        },
        close() {
          ws.close();
        },
      });
      resolve({ ws, stream: ndJsonStream(writable, readable) });
    };
  });
}

async function main() {
  const updates = [];
  const { ws, stream } = await socketStream(url);
  const app = client({ name: "kiwi-acp-ws-check" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .onRequest(methods.client.session.requestPermission, async () => ({ outcome: { outcome: "cancelled" } }));
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
    check("initialize answers protocol 1 as kiwi", init.protocolVersion === 1 && init.agentInfo?.name === "kiwi", init);
    const created = await agent.request(methods.agent.session.new, { cwd: work, mcpServers: [] });
    check("session/new answers an id and the modes", typeof created.sessionId === "string" && created.modes, created);
    const listed = await fetch(`${api}/api/sessions/`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.json());
    const mine = listed.find((s) => s.session_id === created.sessionId);
    check("the browser's API lists the session, running", mine?.is_running === true, listed);
    const done = await agent.request(methods.agent.session.prompt, {
      sessionId: created.sessionId,
      prompt: [{ type: "text", text: "hi" }],
    });
    check("the prompt ends the turn", done.stopReason === "end_turn", done);
    const said = updates
      .filter((u) => u.update.sessionUpdate === "agent_message_chunk")
      .map((u) => u.update.content?.text ?? "")
      .join("");
    check("the answer streamed as session/update", said === "Hello over a socket", updates);
  });
  ws.close();
}

try {
  await main();
} catch (e) {
  check("no exception", false, String(e?.stack ?? e));
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
