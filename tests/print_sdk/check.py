"""Drives kiwi with the Python claude-agent-sdk through its CLI-path option.

Run by tests/print_sdk.rs with KIWI_BIN, KIWI_WORK and KIWI_DIR set; prints one line per check
and a closing "N passed, N failed" line. Each check has its own scripted-echo config, passed to
kiwi with the SDK's extra_args (so that path is exercised too).
"""

import asyncio
import json
import os
import sys

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)

KIWI = os.environ["KIWI_BIN"]
WORK = os.environ["KIWI_WORK"]
DIR = os.environ["KIWI_DIR"]


def config(name, scripts):
    scripts_path = os.path.join(DIR, f"{name}.scripts.json")
    with open(scripts_path, "w") as f:
        json.dump(scripts, f)
    cfg = {
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {
            "p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                  "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}
        },
    }
    path = os.path.join(DIR, f"{name}.config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def options(name, scripts, **kw):
    return ClaudeAgentOptions(cli_path=KIWI, cwd=WORK, extra_args={"config-file": config(name, scripts)}, **kw)


def shell(call_id, command):
    args = json.dumps({"command": command})
    return "tool_call: " + json.dumps({"id": call_id, "name": "Shell", "arguments": args})


async def one_shot():
    seen = []
    async for m in query(prompt="hello", options=options("one_shot", ["text: hi from kiwi"])):
        seen.append(m)
    texts = [b.text for m in seen if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    results = [m for m in seen if isinstance(m, ResultMessage)]
    assert texts == ["hi from kiwi"], texts
    assert len(results) == 1 and results[0].subtype == "success" and not results[0].is_error, results
    assert results[0].result == "hi from kiwi"
    assert results[0].session_id, "a session id"


async def multi_turn():
    async with ClaudeSDKClient(options("multi", ["text: first answer", "text: second answer"])) as client:
        answers = []
        session_ids = set()
        for prompt in ["one", "two"]:
            await client.query(prompt)
            async for m in client.receive_response():
                if isinstance(m, ResultMessage):
                    answers.append(m.result)
                    session_ids.add(m.session_id)
    assert answers == ["first answer", "second answer"], answers
    assert len(session_ids) == 1, session_ids


async def can_use_tool():
    asked = []

    async def decide(tool_name, tool_input, context):
        asked.append((tool_name, tool_input.get("command")))
        if tool_input.get("command") == "echo original":
            return PermissionResultAllow(updated_input={"command": "echo edited"})
        return PermissionResultDeny(message="not this one")

    scripts = [shell("c1", "echo original"), shell("c2", "echo never"), "text: done"]

    async def prompts():
        yield {"type": "user", "message": {"role": "user", "content": "go"}, "parent_tool_use_id": None, "session_id": ""}

    results, tool_results = [], []
    async for m in query(prompt=prompts(), options=options("permissions", scripts, can_use_tool=decide)):
        if isinstance(m, UserMessage) and isinstance(m.content, list):
            tool_results += [b for b in m.content if isinstance(b, ToolResultBlock)]
        if isinstance(m, ResultMessage):
            results.append(m)
    assert asked == [("Shell", "echo original"), ("Shell", "echo never")], asked
    assert "edited" in str(tool_results[0].content) and not tool_results[0].is_error, tool_results[0]
    assert tool_results[1].content == "not this one" and tool_results[1].is_error, tool_results[1]
    assert results[-1].subtype == "success" and results[-1].result == "done", results[-1]
    denials = results[-1].permission_denials
    assert [d["tool_use_id"] for d in denials] == ["c2"], denials


async def interrupt():
    scripts = [shell("s1", "sleep 30"), "text: after"]
    opts = options("interrupt", scripts, permission_mode="bypassPermissions")
    async with ClaudeSDKClient(opts) as client:
        await client.query("run it")
        result = None
        async for m in client.receive_response():
            if isinstance(m, AssistantMessage) and any(isinstance(b, ToolUseBlock) for b in m.content):
                await client.interrupt()
            if isinstance(m, ResultMessage):
                result = m
        assert result is not None and result.is_error and result.subtype == "error_during_execution", result
        await client.query("again")
        async for m in client.receive_response():
            if isinstance(m, ResultMessage):
                assert m.result == "after", m


async def main():
    passed = failed = 0
    for check in [one_shot, multi_turn, can_use_tool, interrupt]:
        try:
            await asyncio.wait_for(check(), timeout=60)
            print(f"ok {check.__name__}")
            passed += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            print(f"FAILED {check.__name__}: {type(e).__name__}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


asyncio.run(main())
