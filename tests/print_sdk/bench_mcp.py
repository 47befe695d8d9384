"""What one MCP tool call costs kiwi in the Claude dialect: an SDK in-process server (calls over
`mcp_message` control requests) next to the same tool in a stdio MCP server (kiwi's rmcp client;
the server is a few lines of plain Python, the SDK's is the `mcp` package's).

Not a test: run it by hand with the venv of tests/print_sdk (the pinned SDK):

    KIWI_BIN=target/release/kiwi target/tmp/print-sdk-venv/bin/python tests/print_sdk/bench_mcp.py

Each run is one turn of N scripted steps, each calling the tool once, then a last answer; the
per-call time is the turn's wall time over N, measured for both servers and for N steps of a tool
that needs no server (`SetTodoList`, the baseline: model call, step, result lines). The MCP round
trip is a server's per-call time minus the baseline's. Prints the medians of a few runs.
"""

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, create_sdk_mcp_server, query, tool

KIWI = os.environ.get("KIWI_BIN", "target/debug/kiwi")
N = int(os.environ.get("KIWI_BENCH_CALLS", "200"))
RUNS = int(os.environ.get("KIWI_BENCH_RUNS", "3"))

# A stdio MCP server written by hand (no library), so its own time is small next to the pipes'.
STDIO_SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "calc", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "add", "description": "Adds two numbers", "inputSchema": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}]}
    elif method == "tools/call":
        args = msg["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


def config(dir, name, call):
    scripts = [call(i) for i in range(N)] + ["text: done"]
    scripts_path = os.path.join(dir, f"{name}.scripts.json")
    with open(scripts_path, "w") as f:
        json.dump(scripts, f)
    cfg = {
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 1000000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}},
        "loop_control": {"max_steps_per_turn": N + 10},
    }
    path = os.path.join(dir, f"{name}.config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def tool_call(name, arguments):
    def make(i):
        return "tool_call: " + json.dumps({"id": f"c{i}", "name": name, "arguments": json.dumps(arguments(i))})
    return make


async def one_turn(options):
    start = time.perf_counter()
    result = None
    async for m in query(prompt="go", options=options):
        if isinstance(m, ResultMessage):
            result = m
    elapsed = time.perf_counter() - start
    assert result is not None and result.result == "done", result
    return elapsed * 1000 / N


async def main():
    @tool("add", "Adds two numbers", {"a": int, "b": int})
    async def add(args):
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    with tempfile.TemporaryDirectory() as dir:
        work = os.path.join(dir, "work")
        os.makedirs(work)
        server_py = os.path.join(dir, "server.py")
        with open(server_py, "w") as f:
            f.write(STDIO_SERVER)
        os.environ["KIMI_SHARE_DIR"] = os.path.join(dir, "share")
        todo = tool_call("SetTodoList", lambda i: {"todos": [{"title": f"t{i}", "status": "pending"}]})
        variants = {
            "baseline (SetTodoList, no MCP)": (todo, {}, []),
            "SDK in-process server": (tool_call("mcp__calc__add", lambda i: {"a": i, "b": 1}),
                                      {"calc": create_sdk_mcp_server("calc", tools=[add])}, ["mcp__calc__add"]),
            "stdio server": (tool_call("add", lambda i: {"a": i, "b": 1}),
                                       {"calc": {"type": "stdio", "command": sys.executable, "args": [server_py]}},
                                       ["add"]),
        }
        times = {}
        for label, (call, servers, allowed) in variants.items():
            cfg = config(dir, label.split()[0], call)
            runs = []
            for _ in range(RUNS):
                options = ClaudeAgentOptions(cli_path=KIWI, cwd=work, extra_args={"config-file": cfg},
                                             mcp_servers=servers, allowed_tools=allowed,
                                             permission_mode="bypassPermissions")
                runs.append(await one_turn(options))
            times[label] = statistics.median(runs)
            print(f"{label}: {times[label]:.3f} ms per step ({N} steps, median of {RUNS} runs)")
        base = times["baseline (SetTodoList, no MCP)"]
        for label in ["SDK in-process server", "stdio server"]:
            print(f"MCP round trip, {label}: {times[label] - base:.3f} ms per call")


asyncio.run(main())
