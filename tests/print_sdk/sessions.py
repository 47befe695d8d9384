"""The Claude Agent SDK's session APIs against kiwi, through the Python claude-agent-sdk.

Run by tests/suite/print_claude_sessions.rs with KIWI_BIN, KIWI_WORK, KIWI_DIR and
KIMI_SHARE_DIR set; prints one line per check and a closing "N passed, N failed" line:
fork_session, resume_session_at (+ resume_drops_turn), rewind_files (enable_file_checkpointing)
and the MCP server controls (toggle, reconnect, status).
"""

import asyncio
import glob
import os
import sys

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    UserMessage,
    query,
)
from kit import DIR, KIWI, WORK, call, config, run_checks

SHARE = os.environ["KIMI_SHARE_DIR"]


def options(name, scripts, extra=None, **kw):
    args = {"config-file": config(name, scripts)}
    args.update(extra or {})
    return ClaudeAgentOptions(cli_path=KIWI, cwd=WORK, extra_args=args, **kw)


def context_of(session_id):
    found = glob.glob(os.path.join(SHARE, "sessions", "*", session_id, "context.jsonl"))
    assert len(found) == 1, (session_id, found)
    with open(found[0]) as f:
        return f.read()


async def refused(attempt, text):
    """Awaits `attempt`, which must fail with an error whose text holds `text`."""
    try:
        await attempt
    except Exception as e:  # noqa: BLE001 - the SDK raises its own error types
        assert text in str(e), e
        return
    raise AssertionError(f"accepted, but should have failed with {text!r}")


async def one(prompt, opts):
    return [m async for m in query(prompt=prompt, options=opts)]


def result_of(seen):
    results = [m for m in seen if isinstance(m, ResultMessage)]
    assert results, [type(m).__name__ for m in seen]
    return results[-1]


async def fork_session():
    first = result_of(await one("first", options("fork_a", ["text: source answer"])))
    source = first.session_id
    forked = result_of(await one("second", options("fork_b", ["text: fork answer"], resume=source,
                                                   fork_session=True)))
    assert not forked.is_error and forked.result == "fork answer", forked
    assert forked.session_id and forked.session_id != source, (source, forked.session_id)
    assert "source answer" in context_of(forked.session_id)
    assert "second" not in context_of(source), "the source is left as it was"


async def resume_session_at():
    # Two turns; the SDK sees each turn's assistant uuid and (replayed) prompt uuid.
    opts = options("at_a", ["text: answer one", "text: answer two"], extra={"replay-user-messages": None})
    ends, prompts, session = [], [], None
    async with ClaudeSDKClient(opts) as client:
        for text in ["one", "two"]:
            await client.query(text)
            async for m in client.receive_response():
                if isinstance(m, AssistantMessage):
                    last = m.uuid
                if isinstance(m, UserMessage) and m.uuid:
                    prompts.append(m.uuid)
                if isinstance(m, ResultMessage):
                    session = m.session_id
            ends.append(last)
    assert len(prompts) == 2 and all(ends), (prompts, ends)
    # Branch after the first turn: the second one is not in the fork's history.
    seen = await one("instead", options("at_b", ["text: branched"], resume=session, fork_session=True,
                                        resume_session_at=ends[0], resume_drops_turn=prompts[1]))
    branched = result_of(seen)
    assert not branched.is_error and branched.result == "branched", branched
    context = context_of(branched.session_id)
    assert "answer one" in context and "answer two" not in context, context
    # A message kiwi never wrote: the SDK raises with Claude Code's text.
    unknown = "4f2c0b6e-0000-4000-8000-000000000000"
    await refused(one("x", options("at_c", ["text: never"], resume=session, resume_session_at=unknown)),
                  f"No message found with message.uuid of: {unknown}")


async def rewind_files():
    path = os.path.join(WORK, "notes.txt")
    with open(path, "w") as f:
        f.write("before\n")
    scripts = [call("w1", "WriteFile", {"path": "notes.txt", "content": "after\n"}), "text: rewritten"]
    opts = options("rewind", scripts, extra={"replay-user-messages": None}, enable_file_checkpointing=True,
                   permission_mode="bypassPermissions")
    async with ClaudeSDKClient(opts) as client:
        await client.query("rewrite the notes")
        checkpoint = None
        async for m in client.receive_response():
            if isinstance(m, UserMessage) and m.uuid and checkpoint is None:
                checkpoint = m.uuid
        with open(path) as f:
            assert f.read() == "after\n"
        assert checkpoint, "the replayed prompt carries its uuid"
        await client.rewind_files(checkpoint)
        with open(path) as f:
            assert f.read() == "before\n", "restored"
        await refused(client.rewind_files("4f2c0b6e-0000-4000-8000-000000000000"),
                      "No file checkpoint found for this message.")


async def mcp_controls():
    server = os.path.join(DIR, "tiny_mcp.py")
    with open(server, "w") as f:
        f.write(TINY_MCP)
    scripts = [call("m1", "say", {}), "text: said", call("m2", "say", {}), "text: not said"]
    opts = options("mcp", scripts, mcp_servers={"tiny": {"type": "stdio", "command": sys.executable,
                                                         "args": [server]}},
                   permission_mode="bypassPermissions")
    async with ClaudeSDKClient(opts) as client:
        await client.query("say it")
        async for m in client.receive_response():
            pass
        status = await client.get_mcp_status()
        assert [(s["name"], s["status"]) for s in status["mcpServers"]] == [("tiny", "connected")], status
        await client.toggle_mcp_server("tiny", False)
        status = await client.get_mcp_status()
        assert status["mcpServers"][0]["status"] == "disabled", status
        await refused(client.reconnect_mcp_server("tiny"), "MCP server tiny is disabled")
        await client.toggle_mcp_server("tiny", True)
        await client.reconnect_mcp_server("tiny")
        status = await client.get_mcp_status()
        assert status["mcpServers"][0]["status"] == "connected", status
        await refused(client.toggle_mcp_server("nope", False), "Server not found: nope")


TINY_MCP = '''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "tiny", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "say", "description": "Says", "inputSchema": {"type": "object"}}]}
    elif m["method"] == "tools/call":
        r = {"content": [{"type": "text", "text": "said"}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
'''


async def main():
    await run_checks([fork_session, resume_session_at, rewind_files, mcp_controls])


asyncio.run(main())
