#!/usr/bin/env python3
"""Writes startup.order: the functions a start-up of the release `kiwi` runs, then those a first
turn adds, for LLD to lay out side by side in that order (see build.rs for why): an idle server
touches only the first part.

Run after `cargo build --release`, then build again:
    python3 benches/startup-order.py && cargo build --release
Needs valgrind (callgrind records which functions ran) and the link map the release build
writes (target/release/build/kiwi-*/out/kiwi.map). The binary is stripped; the map names the
code at each address. Nothing here is needed to build or test kiwi.
"""
import bisect
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "kiwi")


def link_map():
    maps = glob.glob(os.path.join(ROOT, "target", "release", "build", "kiwi-*", "out", "kiwi.map"))
    if not maps:
        sys.exit("no link map: build with `cargo build --release` first (x86_64 Linux, LLD)")
    return max(maps, key=os.path.getmtime)


def text_symbols(path):
    """(address, mangled name) of every function the map places in .text, sorted by address.

    Each function has a section of its own, `.text.<mangled name>`; the map's symbol lines are
    demangled, so the names come from the section lines."""
    symbols = []
    in_text = False
    for line in open(path, encoding="utf-8", errors="replace"):
        # VMA LMA Size Align, then the name, indented by what it is: an output section (1
        # space), an input section (9, "file:(section)") or a symbol (17).
        m = re.match(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+[0-9a-f]+\s+\d+( +)(\S.*?)\s*$", line)
        if not m:
            continue
        indent, name = len(m.group(2)), m.group(3)
        if indent < 4:
            in_text = name == ".text"
        elif in_text and indent < 12:
            section = re.search(r":\(\.text\.(\S+)\)$", name)
            if section:
                # LLVM puts cold and hot code in `.text.unlikely.<name>`, `.text.hot.<name>`.
                symbol = re.sub(r"^(unlikely|hot|startup|exit|split)\.", "", section.group(1))
                symbols.append((int(m.group(1), 16), symbol))
    symbols.sort()
    return symbols


def ran(workdir, with_turn, toml=False):
    """Addresses of the functions that ran in kiwi's own code, from callgrind: a start-up
    (`initialize` answered), and with `with_turn` a first turn after it; the config is JSON (as
    the tests and benches write it) or with `toml` TOML (as people write it)."""
    home, share, work = (os.path.join(workdir, d) for d in ("home", "share", "work"))
    for d in (home, share, work):
        os.makedirs(d)
    todo = json.dumps({"todos": [{"title": "a", "status": "in_progress"}]})
    scripts = ["tool_call: " + json.dumps({"id": "tc-1", "name": "SetTodoList", "arguments": todo}), "text: done"]
    scripts_path = os.path.join(workdir, "scripts.json")
    with open(scripts_path, "w") as f:
        json.dump(scripts, f)
    config = {
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}},
    }
    config_path = os.path.join(workdir, "config.toml" if toml else "config.json")
    with open(config_path, "w") as f:
        if toml:
            provider = config["providers"]["p"]
            f.write('default_model = "scripted"\n[models.scripted]\nprovider = "p"\nmodel = "scripted_echo"\n'
                    'max_context_size = 100000\n[providers.p]\ntype = "_scripted_echo"\nbase_url = ""\n'
                    f'api_key = ""\nenv = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = {json.dumps(provider["env"]["KIMI_SCRIPTED_ECHO_SCRIPTS"])} }}\n')
        else:
            json.dump(config, f)
    out = os.path.join(workdir, "callgrind.out")
    frames = [
        {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocol_version": "1.10"}},
        {"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "go"}},
    ][: 2 if with_turn else 1]
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--callgrind-out-file=" + out, BINARY, "--wire",
         "--config-file", config_path, "--work-dir", work],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=dict(os.environ, HOME=home, KIMI_SHARE_DIR=share))
    for frame in frames:
        proc.stdin.write((json.dumps(frame) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                sys.exit("kiwi ended early")
            if ('"id":"%s"' % frame["id"]).encode() in line and b'"method"' not in line:
                break
    proc.stdin.close()
    proc.wait()
    # Every instruction that ran (`--dump-instr=yes`): a cost line starts with its address,
    # absolute ("0x…") or relative to the one before ("+n", "-n", "*"). Functions entered by a
    # jump (tail calls) have no entry of their own, so the names come from these addresses.
    addresses = set()
    at = 0
    for line in open(out):
        token = line.split(" ", 1)[0].strip()
        if token.startswith("0x"):
            at = int(token, 16)
        elif token[:1] in "+-" and token[1:].isdigit():
            at += int(token)
        elif token != "*":
            continue
        addresses.add(at)
    return addresses


def main():
    symbols = text_symbols(link_map())
    if not symbols:
        sys.exit("the link map lists no .text symbols")
    starts = [a for a, _ in symbols]

    def functions(addresses):
        names = []
        for address in sorted(addresses):
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0 and (not names or names[-1] != symbols[i][1]):
                names.append(symbols[i][1])
        return names

    with tempfile.TemporaryDirectory() as workdir:
        start_up = functions(ran(os.path.join(workdir, "json"), with_turn=False))
        start_up += functions(ran(os.path.join(workdir, "toml"), with_turn=False, toml=True))
    with tempfile.TemporaryDirectory() as workdir:
        with_turn = functions(ran(os.path.join(workdir, "turn"), with_turn=True))
    # What a start-up runs (with either kind of config) first, side by side (an idle server touches only these pages), then
    # what the first turn adds; each part in the order the current build has it (a crate's code
    # stays together).
    names, seen = [], set()
    for name in start_up + with_turn:
        if name not in seen:
            seen.add(name)
            names.append(name)
    with open(os.path.join(ROOT, "startup.order"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"startup.order: {len(names)} functions ({len(set(start_up))} of them at start-up)")


if __name__ == "__main__":
    main()
