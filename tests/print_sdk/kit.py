"""What the SDK check scripts share: where kiwi and the dirs are, scripted configs, and running
the checks.

The scripts run with KIWI_BIN, KIWI_WORK and KIWI_DIR set (tests/suite/print_sdk.rs).
"""

import asyncio
import json
import os
import sys

KIWI = os.environ["KIWI_BIN"]
WORK = os.environ["KIWI_WORK"]
DIR = os.environ["KIWI_DIR"]


def config(name, scripts, helper=None, prices=None):
    """A scripted config; with `helper`, a second model `helper` with its own script queue; with
    `prices`, the scripted model's dollars per million tokens (`usd_per_mtok`)."""
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
    if prices is not None:
        cfg["models"]["scripted"]["usd_per_mtok"] = prices
    if helper is not None:
        helper_path = os.path.join(DIR, f"{name}.helper.json")
        with open(helper_path, "w") as f:
            json.dump(helper, f)
        cfg["models"]["helper"] = {"provider": "q", "model": "helper_echo", "max_context_size": 50000}
        cfg["providers"]["q"] = {"type": "_scripted_echo", "base_url": "", "api_key": "",
                                 "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": helper_path}}
    path = os.path.join(DIR, f"{name}.config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def call(call_id, name, arguments):
    """A scripted tool call."""
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(arguments)})


async def run_checks(checks):
    """Runs each check (60 s at most; `KIWI_SDK_CHECKS` picks some by name), prints one line per
    check and a closing "N passed, N failed" line, and exits 1 when one failed."""
    only = os.environ.get("KIWI_SDK_CHECKS")
    if only:
        checks = [c for c in checks if c.__name__ in only.split(",")]
    passed = failed = 0
    for check in checks:
        try:
            await asyncio.wait_for(check(), timeout=60)
            print(f"ok {check.__name__}")
            passed += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            print(f"FAILED {check.__name__}: {type(e).__name__}: {e}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
