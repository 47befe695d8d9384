// Drives kiwi with the published @openai/codex-sdk through `codexPathOverride`, as a program
// written for codex would: text, streamed events, a command, a file change, a todo list, an MCP
// tool, multi-turn, resume in a new Codex instance, structured output, a provider error, usage,
// cancel (AbortSignal) and an image input. kiwi's config is named through the SDK's `config`
// option (`kiwi.config_file`); each process plays the scripts file as it is when it starts.
// Run by tests/suite/print_codex_sdk.rs; prints "<n> passed, <m> failed" and one run's lines.
import fs from "node:fs";
import path from "node:path";
import { Codex } from "@openai/codex-sdk";

const bin = process.env.KIWI_BIN;
const work = process.env.KIWI_WORK;
const dir = process.env.KIWI_DIR;
const share = process.env.KIMI_SHARE_DIR;
const mcpServer = process.env.KIWI_MCP_SERVER;
const scriptsPath = path.join(dir, "scripts.json");
const configPath = path.join(dir, "kiwi.toml");
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

fs.writeFileSync(
  configPath,
  `default_model = "s"
[models.s]
provider = "p"
model = "scripted_echo"
max_context_size = 100000
[models.vision]
provider = "p"
model = "scripted_echo"
max_context_size = 100000
capabilities = ["image_in"]
[providers.p]
type = "_scripted_echo"
base_url = ""
api_key = ""
env = { KIMI_SCRIPTED_ECHO_SCRIPTS = ${JSON.stringify(scriptsPath)} }
`,
);

// The model calls of the next process, one script each.
const scripts = (...list) => fs.writeFileSync(scriptsPath, JSON.stringify(list));
const call = (id, name, args) => `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
const codex = (config = {}) =>
  new Codex({ codexPathOverride: bin, config: { kiwi: { config_file: configPath }, ...config } });
const threadOptions = { workingDirectory: work, skipGitRepoCheck: true };
const byType = (items, type) => items.filter((i) => i.type === type);

async function collect(thread, input, options) {
  const { events } = await thread.runStreamed(input, options);
  const seen = [];
  for await (const event of events) seen.push(event);
  return seen;
}

async function failure(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return e;
  }
}

async function main() {
  // Text: run() resolves with the answer, the items and the usage; the thread gets its id.
  {
    scripts("text: Hello from kiwi\nusage: input_other=10 output=2");
    const thread = codex().startThread(threadOptions);
    const turn = await thread.run("say hello");
    check("text", turn.finalResponse === "Hello from kiwi" && byType(turn.items, "agent_message").length === 1, turn);
    check("text: the thread id is kiwi's session id", /^[0-9a-f-]{36}$/.test(thread.id ?? ""), thread.id);
    check(
      "usage",
      turn.usage.input_tokens === 10 && turn.usage.output_tokens === 2 && turn.usage.cached_input_tokens === 0,
      turn.usage,
    );
  }

  // Streamed events in codex's order, with the transcript printed for the report.
  let transcript;
  {
    scripts(
      `think: I should look\ntext: Checking.\n${call("c1", "Shell", { command: "echo out && pwd" })}\nusage: input_other=100 output=7 input_cache_read=20`,
      "text: The directory is the work dir.\nusage: input_other=120 output=3 input_cache_read=30",
    );
    const thread = codex().startThread(threadOptions);
    const events = await collect(thread, "where am I?");
    transcript = events;
    const types = events.map((e) => (e.item ? `${e.type}:${e.item.type}` : e.type));
    check(
      "streamed events",
      JSON.stringify(types) ===
        JSON.stringify([
          "thread.started",
          "turn.started",
          "item.completed:reasoning",
          "item.completed:agent_message",
          "item.started:command_execution",
          "item.completed:command_execution",
          "item.completed:agent_message",
          "turn.completed",
        ]),
      types,
    );
    const command = events.find((e) => e.type === "item.completed" && e.item.type === "command_execution")?.item;
    check(
      "a command",
      command?.command === "echo out && pwd" &&
        command.aggregated_output === `out\n${work}\n` &&
        command.exit_code === 0 &&
        command.status === "completed",
      command,
    );
    const usage = events.at(-1).usage;
    check("usage sums the turn's model calls", usage?.input_tokens === 270 && usage.cached_input_tokens === 50 && usage.output_tokens === 10, usage);
  }

  // A failing command is a failed item with its exit code; the turn goes on.
  {
    scripts(`${call("c1", "Shell", { command: "echo to-stderr >&2; exit 3" })}`, "text: it failed");
    const turn = await codex().startThread(threadOptions).run("fail");
    const command = byType(turn.items, "command_execution")[0];
    check("a failed command", command?.exit_code === 3 && command.status === "failed" && command.aggregated_output === "to-stderr\n", command);
  }

  // A file change under workspace-write; under the default read-only nothing is written.
  {
    scripts(`${call("w1", "WriteFile", { path: "hello.txt", content: "hi\n" })}`, "text: written");
    const turn = await codex().startThread({ ...threadOptions, sandboxMode: "workspace-write" }).run("write it");
    const change = byType(turn.items, "file_change")[0];
    check(
      "a file change",
      change?.status === "completed" &&
        JSON.stringify(change.changes) === JSON.stringify([{ path: path.join(work, "hello.txt"), kind: "add" }]) &&
        fs.readFileSync(path.join(work, "hello.txt"), "utf8") === "hi\n",
      change,
    );
    scripts(`${call("w2", "WriteFile", { path: "blocked.txt", content: "no" })}`, "text: refused");
    const readOnly = await codex().startThread(threadOptions).run("write it");
    check(
      "read-only refuses the edit (no item, the turn goes on)",
      byType(readOnly.items, "file_change").length === 0 && !fs.existsSync(path.join(work, "blocked.txt")) && readOnly.finalResponse === "refused",
      readOnly.items,
    );
  }

  // A todo list: started, updated, completed at the end of the turn.
  {
    const list = (done) => ({ todos: [{ title: "inspect", status: "done" }, { title: "fix", status: done ? "done" : "pending" }] });
    scripts(`${call("t1", "SetTodoList", list(false))}`, `${call("t2", "SetTodoList", list(true))}`, "text: all done");
    const events = await collect(codex().startThread(threadOptions), "plan it");
    const todo = events.filter((e) => e.item?.type === "todo_list");
    const last = todo.at(-1)?.item.items;
    check(
      "a todo list",
      JSON.stringify(todo.map((e) => e.type)) === JSON.stringify(["item.started", "item.updated", "item.completed"]) &&
        events.at(-2) === todo.at(-1) &&
        JSON.stringify(last) === JSON.stringify([{ text: "inspect", completed: true }, { text: "fix", completed: true }]),
      todo,
    );
  }

  // An MCP tool from the SDK's `mcp_servers` config.
  {
    scripts(`${call("m1", "echo", { text: "hi" })}`, `${call("m2", "fail", {})}`, "text: asked");
    const withServer = codex({ mcp_servers: { tst: { command: mcpServer, args: [] } } });
    const turn = await withServer.startThread({ ...threadOptions, sandboxMode: "workspace-write" }).run("use the tool");
    const [echo, fail] = byType(turn.items, "mcp_tool_call");
    check(
      "an MCP tool",
      echo?.server === "tst" &&
        echo.tool === "echo" &&
        echo.arguments.text === "hi" &&
        echo.status === "completed" &&
        echo.result.content[0].text === "pong:hi",
      echo,
    );
    check("an MCP tool's error result", fail?.status === "failed" && fail.result.content[0].text === "it went wrong", fail);
    scripts(`${call("m3", "echo", { text: "hi" })}`, "text: not allowed");
    const readOnly = await withServer.startThread(threadOptions).run("use the tool");
    const refusedCall = byType(readOnly.items, "mcp_tool_call")[0];
    check(
      "read-only refuses an MCP tool without readOnlyHint",
      refusedCall?.status === "failed" && refusedCall.error?.message === "MCP tool call requires approval, but approval policy is never",
      refusedCall,
    );
  }

  // Multi-turn on one Thread, then resume in a new Codex instance: one thread, a running total.
  {
    scripts("text: first\nusage: input_other=10 output=1");
    const thread = codex().startThread(threadOptions);
    const one = await thread.run("one");
    scripts("text: second\nusage: input_other=20 output=2");
    const two = await thread.run("two");
    check("multi-turn", one.finalResponse === "first" && two.finalResponse === "second" && two.usage.input_tokens === 30, two.usage);
    scripts("text: third\nusage: input_other=40 output=4");
    const resumed = codex().resumeThread(thread.id, threadOptions);
    const three = await resumed.run("three");
    check(
      "resume in a new instance",
      resumed.id === thread.id && three.finalResponse === "third" && three.usage.input_tokens === 70 && three.usage.output_tokens === 7,
      { id: resumed.id, usage: three.usage },
    );
    const unknown = await failure(codex().resumeThread("019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607", threadOptions).run("x"));
    check("an unknown thread fails with its id", unknown?.message.includes("019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607"), unknown?.message);
  }

  // Structured output: the schema reaches the model's instructions; the answer is the JSON text.
  {
    scripts('text: {"answer": 42}');
    const thread = codex().startThread(threadOptions);
    const schema = { type: "object", properties: { answer: { type: "number" } }, required: ["answer"] };
    const turn = await thread.run("answer", { outputSchema: schema });
    const context = sessionFile(thread.id, "context.jsonl");
    check(
      "structured output",
      JSON.parse(turn.finalResponse).answer === 42 && context.includes('\\"required\\":[\\"answer\\"]'),
      turn.finalResponse,
    );
  }

  // A provider error: run() rejects with the message; runStreamed yields turn.failed first.
  {
    scripts("error: boom");
    const err = await failure(codex().startThread(threadOptions).run("fail"));
    check("a provider error", err && /boom/.test(err.message), err?.message);
    scripts();
    const events = [];
    const thrown = await failure(
      (async () => {
        const { events: stream } = await codex().startThread(threadOptions).runStreamed("fail");
        for await (const e of stream) events.push(e);
      })(),
    );
    const failedEvent = events.find((e) => e.type === "turn.failed");
    check(
      "a provider error, streamed",
      failedEvent?.error.message === "ScriptedEchoChatProvider exhausted at turn 1." &&
        events.at(-1) === failedEvent &&
        /exited with code 1/.test(thrown?.message ?? ""),
      { events, thrown: thrown?.message },
    );
  }

  // Cancel: aborting while a command runs ends the process; the SDK throws AbortError.
  {
    scripts(`${call("s1", "Shell", { command: "sleep 1; touch nope" })}`, "text: never");
    const controller = new AbortController();
    const thread = codex().startThread({ ...threadOptions, sandboxMode: "workspace-write" });
    const thrown = await failure(
      (async () => {
        const { events } = await thread.runStreamed("wait", { signal: controller.signal });
        for await (const e of events) {
          if (e.type === "item.started" && e.item.type === "command_execution") controller.abort();
        }
      })(),
    );
    check("cancel", thrown?.name === "AbortError", thrown?.message);
    scripts("text: after the cancel");
    const after = await codex().resumeThread(thread.id, threadOptions).run("go on");
    check("the cancelled thread resumes", after.finalResponse === "after the cancel", after);
    // Had the command outlived the abort, it would have touched the file by now.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    check("the cancelled command is gone", !fs.existsSync(path.join(work, "nope")), "nope exists");
  }

  // An image input: the image part goes before the text; a model without image_in refuses it.
  {
    const png = path.join(dir, "dot.png");
    fs.writeFileSync(
      png,
      Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64"),
    );
    const input = [
      { type: "text", text: "what is this?" },
      { type: "local_image", path: png },
    ];
    scripts("text: a dot");
    const thread = codex().startThread({ ...threadOptions, model: "vision" });
    const turn = await thread.run(input);
    const begin = sessionFile(thread.id, "wire.jsonl")
      .split("\n")
      .filter((l) => l.includes('"TurnBegin"'))
      .map((l) => JSON.parse(l).message.payload.user_input)[0];
    check(
      "an image input",
      turn.finalResponse === "a dot" && begin?.[0]?.type === "image_url" && begin[0].image_url.url.startsWith("data:image/png;base64,") && begin[1]?.text === "what is this?",
      begin,
    );
    scripts("text: never");
    const blind = await failure(codex().startThread(threadOptions).run(input));
    check("an image for a model without image_in fails the turn", /image_in/.test(blind?.message ?? ""), blind?.message);
  }

  console.log("TRANSCRIPT");
  for (const event of transcript ?? []) console.log(JSON.stringify(event));
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

// A file of a stored session (found by id under any work dir's folder).
function sessionFile(id, name) {
  const root = path.join(share, "sessions");
  for (const key of fs.readdirSync(root)) {
    const file = path.join(root, key, id, name);
    if (fs.existsSync(file)) return fs.readFileSync(file, "utf8");
  }
  return "";
}

main().catch((e) => {
  console.log(`FAILED - the check crashed: ${e.stack ?? e}`);
  process.exit(1);
});
