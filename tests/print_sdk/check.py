"""Drives kiwi with the Python claude-agent-sdk through its CLI-path option.

Run by tests/print_sdk.rs with KIWI_BIN, KIWI_WORK and KIWI_DIR set; prints one line per check
and a closing "N passed, N failed" line. Each check has its own scripted-echo config, passed to
kiwi with the SDK's extra_args (so that path is exercised too).
"""

import asyncio
import json
import os

from claude_agent_sdk import (
    AgentDefinition,
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)
from kit import KIWI, WORK, call, config, run_checks

def options(name, scripts, helper=None, prices=None, **kw):
    return ClaudeAgentOptions(cli_path=KIWI, cwd=WORK,
                              extra_args={"config-file": config(name, scripts, helper, prices)}, **kw)


def shell(call_id, command):
    return call(call_id, "Shell", {"command": command})


def tool_results(messages):
    return [b for m in messages if isinstance(m, UserMessage) and isinstance(m.content, list)
            for b in m.content if isinstance(b, ToolResultBlock)]


def prompt_stream(text):
    async def prompts():
        yield {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None,
               "session_id": ""}
    return prompts()


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


async def sdk_mcp_tool():
    calls = []

    @tool("add", "Adds two numbers", {"a": int, "b": int})
    async def add(args):
        calls.append(args)
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    @tool("boom", "Always fails", {})
    async def boom(args):
        raise RuntimeError("the handler broke")

    calc = create_sdk_mcp_server("calc", tools=[add, boom])
    scripts = [call("m1", "mcp__calc__add", {"a": 2, "b": 3}), call("m2", "mcp__calc__boom", {}), "text: five"]
    opts = options("sdk_mcp", scripts, mcp_servers={"calc": calc},
                   allowed_tools=["mcp__calc__add", "mcp__calc__boom"])
    seen = [m async for m in query(prompt="add them", options=opts)]
    init = next(m for m in seen if isinstance(m, SystemMessage) and m.subtype == "init")
    assert {"name": "calc", "status": "connected", "source": "sdk"} in init.data["mcp_servers"], init.data
    assert "mcp__calc__add" in init.data["tools"], init.data["tools"]
    assert calls == [{"a": 2, "b": 3}], calls
    results = tool_results(seen)
    assert "5" in str(results[0].content) and not results[0].is_error, results[0]
    assert results[1].is_error, results[1]
    final = seen[-1]
    assert isinstance(final, ResultMessage) and final.result == "five" and not final.is_error, final


async def hooks():
    pre, post = [], []

    async def guard(input_data, tool_use_id, context):
        pre.append((input_data["tool_name"], input_data["tool_input"].get("command"), tool_use_id))
        if "rm " in input_data["tool_input"].get("command", ""):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": "no rm here"}}
        return {}

    async def watch(input_data, tool_use_id, context):
        post.append((input_data["tool_name"], str(input_data.get("tool_response")), tool_use_id))
        return {}

    scripts = [shell("h1", "rm -rf build"), shell("h2", "echo hook-seen"), "text: done"]
    opts = options("hooks", scripts, permission_mode="bypassPermissions", hooks={
        "PreToolUse": [HookMatcher(matcher="Bash|Shell", hooks=[guard])],
        "PostToolUse": [HookMatcher(matcher=None, hooks=[watch])],
    })
    seen = [m async for m in query(prompt=prompt_stream("go"), options=opts)]
    assert [(t, c) for t, c, _ in pre] == [("Shell", "rm -rf build"), ("Shell", "echo hook-seen")], pre
    assert [i for _, _, i in pre] == ["h1", "h2"], pre
    assert len(post) == 1 and post[0][0] == "Shell" and "hook-seen" in post[0][1] and post[0][2] == "h2", post
    results = tool_results(seen)
    assert results[0].is_error and results[0].content == "PreToolUse:Shell hook error: no rm here", results[0]
    assert "hook-seen" in str(results[1].content) and not results[1].is_error, results[1]
    final = seen[-1]
    assert final.result == "done", final
    assert [d["tool_use_id"] for d in final.permission_denials] == ["h1"], final.permission_denials


async def structured_output():
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"]}
    scripts = [call("s1", "StructuredOutput", {"city": "Paris", "population": "many"}),
               call("s2", "StructuredOutput", {"city": "Paris", "population": 2100000}),
               "text: never read"]
    opts = options("structured", scripts, output_format={"type": "json_schema", "schema": schema})
    seen = [m async for m in query(prompt="which city?", options=opts)]
    results = tool_results(seen)
    assert results[0].is_error and "/population" in str(results[0].content), results[0]
    assert "Output does not match required schema" in str(results[0].content), results[0]
    assert "Structured output provided successfully" in str(results[1].content), results[1]
    final = seen[-1]
    assert final.structured_output == {"city": "Paris", "population": 2100000}, final
    assert json.loads(final.result) == final.structured_output and final.num_turns == 2, final
    assert final.stop_reason == "tool_use", final


async def agents():
    long_review = "The change looks fine. " * 12
    scripts = [call("ag1", "Agent", {"description": "review the diff", "prompt": "Review x.py",
                                     "subagent_type": "reviewer", "run_in_background": False}),
               "text: " + long_review,
               "text: reviewed"]
    reviewer = AgentDefinition(description="Reviews code", prompt="You review code.", tools=["Read", "Grep"])
    opts = options("agents", scripts, agents={"reviewer": reviewer}, permission_mode="bypassPermissions")
    seen = [m async for m in query(prompt=prompt_stream("review it"), options=opts)]
    init = next(m for m in seen if isinstance(m, SystemMessage) and m.subtype == "init")
    assert "reviewer" in init.data["agents"], init.data["agents"]
    inside = [m for m in seen if isinstance(m, (AssistantMessage, UserMessage)) and m.parent_tool_use_id == "ag1"]
    texts = [b.text for m in inside if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    assert texts and texts[0].startswith("The change looks fine."), [type(m).__name__ for m in seen]
    prompts = [m.content for m in inside if isinstance(m, UserMessage) and isinstance(m.content, str)]
    assert prompts == ["Review x.py"], prompts
    started = [m for m in seen if isinstance(m, TaskStartedMessage)]
    ended = [m for m in seen if isinstance(m, TaskNotificationMessage)]
    assert len(started) == 1 and started[0].tool_use_id == "ag1" and started[0].task_type == "local_agent", started
    assert started[0].data["subagent_type"] == "reviewer", started[0].data
    assert len(ended) == 1 and ended[0].task_id == started[0].task_id and ended[0].status == "completed", ended
    agent_result = next(b for b in tool_results(seen) if b.tool_use_id == "ag1")
    # Claude Code's shape: the subagent's final text, as a list of text blocks, nothing added.
    content = agent_result.content
    assert isinstance(content, list) and len(content) == 1 and content[0]["type"] == "text", agent_result
    assert content[0]["text"].strip() == long_review.strip() and not agent_result.is_error, agent_result
    assert seen[-1].result == "reviewed", seen[-1]


async def background_agent():
    # The subagent runs on the model `helper` its definition names (its own script queue) and
    # waits for a file the check writes once the first turn's result is in.
    go = os.path.join(WORK, "go")
    if os.path.exists(go):
        os.remove(go)
    long_news = "The wait is over and all is well. " * 8
    scripts = [call("bg1", "Agent", {"description": "wait for go", "prompt": "Wait for go",
                                     "subagent_type": "waiter", "run_in_background": True}),
               "text: started it",
               "text: got the news"]
    helper = [shell("w1", "while [ ! -f go ]; do sleep 0.05; done; echo went"), "text: " + long_news]
    waiter = AgentDefinition(description="Waits", prompt="You wait.", tools=["Bash"], model="helper")
    after = []

    async def watch(input_data, tool_use_id, context):
        after.append(tool_use_id)
        return {}

    stderr = []
    opts = options("background", scripts, helper, agents={"waiter": waiter}, permission_mode="bypassPermissions",
                   hooks={"PostToolUse": [HookMatcher(matcher=None, hooks=[watch])]}, stderr=stderr.append)
    seen = []
    # A one-shot query with a hook: the SDK keeps kiwi's input open while the task runs (the
    # subagent's call after the first result is still seen by the hook), and the task's end
    # wakes the main agent for a second turn.
    async for m in query(prompt="start a waiter", options=opts):
        seen.append(m)
        if isinstance(m, ResultMessage) and not os.path.exists(go):
            open(go, "w").close()
    started = [m for m in seen if isinstance(m, TaskStartedMessage)]
    assert len(started) == 1 and started[0].tool_use_id == "bg1" and started[0].task_type == "local_agent", started
    assert started[0].data["is_backgrounded"] is True, started[0].data
    ended = [m for m in seen if isinstance(m, TaskNotificationMessage)]
    assert len(ended) == 1 and ended[0].task_id == started[0].task_id and ended[0].status == "completed", ended
    inside = [m for m in seen if isinstance(m, AssistantMessage) and m.parent_tool_use_id == "bg1"]
    texts = [b.text for m in inside for b in m.content if isinstance(b, TextBlock)]
    assert texts and texts[0].startswith("The wait is over"), [type(m).__name__ for m in seen]
    results = [m.result for m in seen if isinstance(m, ResultMessage)]
    assert results == ["started it", "got the news"], results
    assert "w1" in after, after
    assert not any("waiting for" in line for line in stderr), stderr


async def control_queries():
    async with ClaudeSDKClient(options("control", ["text: counted"])) as client:
        await client.query("count")
        async for m in client.receive_response():
            pass
        usage = await client.get_context_usage()
        assert usage["maxTokens"] == 100000 and usage["model"] == "scripted_echo", usage
        # The scripted provider reports no token counts: the context's size is what the model last said.
        assert usage["totalTokens"] == 0 and usage["percentage"] == 0, usage
        assert [c["name"] for c in usage["categories"]] == ["Messages", "Free space"], usage
        status = await client.get_mcp_status()
        assert status == {"mcpServers": []}, status
        await client.set_permission_mode("acceptEdits")
        try:
            await client.set_permission_mode("sometimes")
            raise AssertionError("an unknown mode was accepted")
        except Exception as e:  # noqa: BLE001 - the SDK raises a plain Exception for error responses
            assert "Cannot set permission mode" in str(e), e


PRICES = {"input": 2, "output": 10, "cache_read": 0.5, "cache_write": 2.5}
# $0.009 and $0.016 at PRICES (the same turns as tests/suite/cost.rs).
TURN_ONE = "text: one\nusage: input_other=1000 output=500 input_cache_read=2000 input_cache_creation=400"
TURN_TWO = "text: two\nusage: input_other=3000 output=1000"


async def cost_and_budget():
    async with ClaudeSDKClient(options("cost", [TURN_ONE, TURN_TWO], prices=PRICES)) as client:
        totals = []
        model_costs = []
        for prompt in ["one", "two"]:
            await client.query(prompt)
            async for m in client.receive_response():
                if isinstance(m, ResultMessage):
                    totals.append(m.total_cost_usd)
                    model_costs.append(m.model_usage["scripted_echo"]["costUSD"])
    assert totals == [0.009, 0.025], totals
    assert model_costs == [0.009, 0.025], model_costs
    # The SDK's max_budget_usd: the step that would go past it is never made.
    budget_turn = TURN_ONE + "\n" + call("t1", "SetTodoList", {"todos": []})
    results = []
    try:
        async for m in query(prompt="go", options=options("budget", [budget_turn, "text: never"], prices=PRICES,
                                                          max_budget_usd=0.005)):
            if isinstance(m, ResultMessage):
                results.append(m)
    except Exception:  # noqa: BLE001 - the SDK raises after an error result; the result was seen
        pass
    assert len(results) == 1, results
    assert results[0].subtype == "error_max_budget_usd" and results[0].is_error, results[0]
    assert results[0].total_cost_usd == 0.009, results[0].total_cost_usd


async def main():
    await run_checks([one_shot, multi_turn, can_use_tool, interrupt, sdk_mcp_tool, hooks, structured_output, agents,
                      background_agent, control_queries, cost_and_budget])


asyncio.run(main())
