"""kiwi web's browser UI in a real headless Chromium, driven with Playwright.

Run by tests/suite/web_browser.rs. Environment: KIWI_BIN (the kiwi binary), KIWI_DIR (an empty
temp dir), KIWI_CHROMIUM (the browser executable), KIWI_SCREENSHOTS (where screenshots go).

A person's path through the UI: open it, start a session in the work dir, send a prompt, watch
the scripted answer appear while the turn still runs, approve a shell command, see its output,
reload and find the conversation again, then start a second turn and join it from a second page,
answer its approval there and see both pages close the request. Screenshots of each stage are
saved. Then, in a forked session: Esc stops a turn waiting for approval and both pages say
"Stopped." (also after a reload and in a browser with nothing stored: the server keeps the
marks), a running Shell card shows its output as it comes and its elapsed time, `/undo` takes
the undone turn out of the view at once, the session exports as a ZIP, a print run's session is
marked and folded away; and a fresh install (no config) gets the model setup panel, whose model
answers the first prompt. Prints
"<n> passed, <m> failed"; exits non-zero on any failure.
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import urllib.request

from playwright.sync_api import expect, sync_playwright

KIWI = os.environ["KIWI_BIN"]
DIR = pathlib.Path(os.environ["KIWI_DIR"])
CHROMIUM = os.environ["KIWI_CHROMIUM"]
SHOTS = pathlib.Path(os.environ["KIWI_SCREENSHOTS"])
TIMEOUT_MS = 30_000

HOME = DIR / "home"
SHARE = HOME / ".kimi"
WORK = DIR / "work"

# One queue of scripts per session, read from the first one (docs/scripted-echo.md).
SCRIPTS = [
    # Turn 1, step 1: thinking, text (with HTML that must stay text), a todo list, a shell call.
    "\n".join(
        [
            "id: msg-1",
            "usage: input_other=1200 output=40",
            "think: The user wants a command run; first say hello.",
            "text: Hello from **kiwi web**.",
            "text:  I will run a command.",
            "text:  <b id=\"injected\">not bold</b>",
            'tool_call: {"id": "tc-todo", "name": "SetTodoList", "arguments": "{\\"todos\\": [{\\"title\\": \\"Say hello\\", \\"status\\": \\"done\\"}, {\\"title\\": \\"Run the command\\", \\"status\\": \\"in_progress\\"}]}"}',
            'tool_call: {"id": "tc-1", "name": "Shell", "arguments": "{\\"command\\": \\"echo kiwi-shell-ok\\"}"}',
        ]
    ),
    # Turn 1, step 2.
    "text: The command printed `kiwi-shell-ok`. All done.",
    # Turn 2, step 1: another shell call, answered from the second page.
    "\n".join(
        [
            "text: Second turn: running another command.",
            'tool_call: {"id": "tc-2", "name": "Shell", "arguments": "{\\"command\\": \\"echo live-line-1 && sleep 3 && echo second-turn-ok\\"}"}',
        ]
    ),
    # Turn 2, step 2.
    "text: Second turn finished.",
]

results = []


def check(name):
    def wrap(fn):
        results.append((name, fn))
        return fn

    return wrap


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config():
    SHARE.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    scripts = DIR / "scripts.json"
    scripts.write_text(json.dumps(SCRIPTS))
    (SHARE / "config.toml").write_text(
        "\n".join(
            [
                'default_model = "scripted"',
                "",
                "[models.scripted]",
                'provider = "scripted_provider"',
                'model = "scripted_echo"',
                "max_context_size = 100000",
                "",
                # Priced: the first step (1200 in, 40 out) costs $0.0028.
                "[models.scripted.usd_per_mtok]",
                "input = 2",
                "output = 10",
                "",
                "[providers.scripted_provider]",
                'type = "_scripted_echo"',
                'base_url = ""',
                'api_key = ""',
                "",
                "[providers.scripted_provider.env]",
                f"KIMI_SCRIPTED_ECHO_SCRIPTS = {json.dumps(str(scripts))}",
                "",
            ]
        )
    )


class Server:
    """`kiwi web` on a free port, in the work dir, with the temp home (or `share`)."""

    def __init__(self, share=SHARE):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "KIWI_"))}
        env.update({"HOME": str(HOME), "KIMI_SHARE_DIR": str(share)})
        self.port = free_port()
        self.proc = subprocess.Popen(
            [KIWI, "web", "--port", str(self.port), "--no-open"],
            cwd=WORK,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = []
        self.err = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()
        self.token = None
        self.url = self._wait_ready()

    @staticmethod
    def _read(stream, sink):
        for line in stream:
            sink.append(line.rstrip("\n"))

    def _wait_ready(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kiwi web exited with {self.proc.returncode}: {self.err}")
            for line in list(self.out):
                m = re.search(r"Local\s+(http://\S+)", line)
                if m:
                    base = m.group(1).split("/?")[0].rstrip("/")
                    # kiwi web requires the token its banner prints, on loopback too.
                    t = re.search(r"[?&]token=([^&\s]+)", m.group(1))
                    self.token = urllib.parse.unquote(t.group(1)) if t else None
                    try:
                        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                            if json.load(r) == {"status": "ok"}:
                                return base.replace("localhost", "127.0.0.1")
                    except OSError:
                        pass
            time.sleep(0.1)
        raise RuntimeError(f"kiwi web did not come up: {self.out} {self.err}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def send(page, text):
    """Types a message in the composer and sends it with Enter."""
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def watch_console(page, label, errors):
    page.on("pageerror", lambda e: errors.append(f"{label}: page error: {e}"))
    page.on("console", lambda m: errors.append(f"{label}: console {m.type}: {m.text}") if m.type == "error" else None)


def main():
    write_config()
    server = Server()
    errors = []
    ctx = {}
    passed = failed = 0
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            watch_console(page, "page A", errors)
            ctx.update(server=server, browser=browser, context=context, page=page, errors=errors)
            for name, fn in results:
                try:
                    fn(ctx)
                    passed += 1
                    print(f"ok: {name}", flush=True)
                except Exception:  # noqa: BLE001 - every failure is reported, then the run stops
                    failed += 1
                    print(f"FAILED: {name}\n{traceback.format_exc()}", flush=True)
                    for label in ("page", "page_b"):
                        if label in ctx:
                            try:
                                shot(ctx[label], f"failed-{label}")
                            except Exception:  # noqa: BLE001
                                pass
                    break
            browser.close()
    finally:
        server.stop()
        if errors:
            print("browser console:\n  " + "\n  ".join(errors))
        if failed:
            print("kiwi web stderr (last lines):\n  " + "\n  ".join(server.err[-40:]))
    skipped = len(results) - passed - failed
    print(f"{passed} passed, {failed} failed" + (f", {skipped} not run" if skipped else ""))
    return 0 if failed == 0 and skipped == 0 else 1


# ---------------------------------------------------------------------------------------------


@check("the page loads with its assets and no console errors")
def _open(c):
    page = c["page"]
    token = c["server"].token
    response = page.goto(c["server"].url + "/?token=" + urllib.parse.quote(token, safe=""))
    # The UI keeps the token and takes it out of the address bar.
    expect(page).not_to_have_url(re.compile("token="))
    assert response.status == 200
    assert "no-store" in response.headers.get("cache-control", "")
    expect(page.locator("#welcome")).to_be_visible()
    expect(page.locator("#new-session")).to_be_visible()
    asset = page.evaluate("document.querySelector('link[rel=stylesheet]').href")
    with urllib.request.urlopen(asset) as r:
        assert "immutable" in r.headers["Cache-Control"], r.headers["Cache-Control"]
    assert not c["errors"], c["errors"]


@check("the Markdown renderer escapes HTML and refuses script links")
def _markdown(c):
    page = c["page"]
    html = page.evaluate(
        """async () => {
            const base = document.querySelector('script[type=module]').src.replace(/app\\.js$/, '');
            const md = await import(base + 'markdown.js');
            return md.renderMarkdown([
                '# T <script>alert(1)</script>',
                '<img src=x onerror=alert(1)> [a](javascript:alert(1)) [b](https://example.com/?q=1&r=2)',
                '```html', '<b>code</b>', '```',
                '| h |', '|---|', '| <i>c</i> |',
            ].join('\\n'));
        }"""
    )
    probe = page.evaluate("(html) => { const d = document.createElement('div'); d.innerHTML = html; return [...d.querySelectorAll('*')].map(e => e.tagName.toLowerCase()); }", html)
    assert not {"script", "img", "b", "i"} & set(probe), (probe, html)
    assert "javascript:" not in re.findall(r'href="([^"]*)"', html).__str__(), html
    assert 'href="https://example.com/?q=1&amp;r=2"' in html, html
    assert "&lt;script&gt;" in html and "&lt;b&gt;code&lt;/b&gt;" in html, html


@check("a new session is created in the work dir from the dialog")
def _new_session(c):
    page = c["page"]
    page.click("#new-session")
    dialog = page.locator("dialog.modal")
    field = dialog.locator("input[type=text]")
    expect(field).to_have_value(str(WORK.resolve()))
    dialog.locator("button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"\?session=[0-9a-f-]{36}$"))
    c["session_url"] = page.url
    expect(page.locator("#session-sub")).to_have_text(str(WORK.resolve()))
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")
    expect(page.locator(".session-item.active")).to_have_count(1)
    # Ready to type at once.
    expect(page.locator("#prompt")).to_be_focused()


@check("the answer appears while the turn runs, and the shell command asks for approval")
def _prompt(c):
    page = c["page"]
    page.fill("#prompt", "Please say hello and run a command")
    page.press("#prompt", "Enter")
    expect(page.locator(".user-msg .user-text").first).to_have_text("Please say hello and run a command")
    answer = page.locator(".turn").first.locator(".md.answer").first
    expect(answer).to_contain_text("Hello from kiwi web.")
    expect(answer.locator("strong")).to_have_text("kiwi web")
    # Markup in the model's text is shown as text, never as HTML.
    expect(answer).to_contain_text('<b id="injected">not bold</b>')
    assert page.locator("#injected").count() == 0
    approval = page.locator(".request.approval")
    expect(approval).to_be_visible()
    expect(approval).to_contain_text("echo kiwi-shell-ok")
    expect(page.locator("#status-line .state-pill")).to_have_text("working")
    expect(page.locator("#stop-btn")).to_be_visible()
    expect(page.locator('.tool[data-tool="Shell"]').first).to_have_attribute("data-state", "waiting")
    expect(page.locator("#todo-toggle")).to_contain_text("Todo 1/2")
    expect(page.locator(".think")).to_have_count(1)
    shot(page, "01-mid-turn-approval")


@check("approving runs the command; its output and the final answer show")
def _approve(c):
    page = c["page"]
    page.locator(".request.approval button.primary").click()
    expect(page.locator(".request.approval")).to_have_count(0)
    shell = page.locator('.tool[data-tool="Shell"]').first
    expect(shell).to_have_attribute("data-state", "ok")
    expect(shell.locator(".tool-output")).to_contain_text("kiwi-shell-ok")
    expect(shell.locator(".tool-note")).to_have_text("Approved")
    expect(page.locator(".turn").first).to_contain_text("All done.")
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")
    expect(page.locator("#stop-btn")).to_be_hidden()
    # The status line shows usage, never the raw message id.
    expect(page.locator("#status-line")).to_contain_text("in 1.2k")
    assert "msg-1" not in page.locator("#status-line").inner_text()
    # And what the session cost (the UI asks for the `cost` extension).
    expect(page.locator("#status-line .cost")).to_have_text("$0.0028 · turn $0.0028")
    shot(page, "02-turn-finished")


@check("a reload shows the same conversation (history replay)")
def _reload(c):
    page = c["page"]
    page.reload()
    expect(page.locator(".user-msg .user-text").first).to_have_text("Please say hello and run a command")
    expect(page.locator(".turn").first).to_contain_text("Hello from kiwi web.")
    expect(page.locator(".turn").first).to_contain_text("All done.")
    shell = page.locator('.tool[data-tool="Shell"]').first
    expect(shell).to_have_attribute("data-state", "ok")
    expect(shell.locator(".tool-output")).to_contain_text("kiwi-shell-ok")
    # The decision comes from the server (kiwi's marks), not from this browser.
    expect(shell.locator(".tool-note")).to_have_text("Approved")
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")
    expect(page.locator("#todo-toggle")).to_contain_text("Todo 1/2")
    # The session's cost comes back with `initialize`.
    expect(page.locator("#status-line .cost")).to_have_text("$0.0028")
    shot(page, "03-after-reload")


@check("a second page joins the running turn and answers its approval; both pages see it resolved")
def _second_page(c):
    page = c["page"]
    page.fill("#prompt", "Run another one")
    page.press("#prompt", "Enter")
    expect(page.locator(".request.approval")).to_contain_text("echo second-turn-ok")
    page_b = c["context"].new_page()
    watch_console(page_b, "page B", c["errors"])
    c["page_b"] = page_b
    page_b.goto(c["session_url"])
    # History first: the finished turn and the running one's beginning.
    expect(page_b.locator(".turn")).to_have_count(2)
    expect(page_b.locator(".turn").nth(0)).to_contain_text("All done.")
    expect(page_b.locator(".turn").nth(1)).to_contain_text("Second turn: running another command.")
    expect(page_b.locator("#status-line .state-pill")).to_have_text("working")
    approval_b = page_b.locator(".request.approval")
    expect(approval_b).to_contain_text("echo second-turn-ok")
    shot(page_b, "04-second-page-joined")
    approval_b.locator("button.primary").click()
    for p in (page, page_b):
        expect(p.locator(".request.approval")).to_have_count(0)
        second = p.locator(".turn").nth(1)
        expect(second).to_contain_text("Second turn finished.")
        expect(second.locator('.tool[data-tool="Shell"] .tool-output')).to_contain_text("second-turn-ok")
        expect(second.locator('.tool[data-tool="Shell"] .tool-note')).to_have_text("Approved")
        expect(p.locator("#status-line .state-pill")).to_have_text("ready")
    shot(page, "05-first-page-after-other-approved")


@check("the conversation is readable on a phone-sized screen")
def _phone(c):
    phone = c["browser"].new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.set_default_timeout(TIMEOUT_MS)
    page = phone.new_page()
    watch_console(page, "phone", c["errors"])
    # A new browser context has no stored token: the link carries it, as the banner's does.
    sep = "&" if "?" in c["session_url"] else "?"
    page.goto(c["session_url"] + sep + "token=" + urllib.parse.quote(c["server"].token, safe=""))
    expect(page.locator(".turn")).to_have_count(2)
    # A browser that never saw the approvals still shows them: they come from the server.
    expect(page.locator('.turn >> nth=0 >> .tool[data-tool="Shell"] .tool-note')).to_have_text("Approved")
    expect(page.locator('.turn >> nth=1 >> .tool[data-tool="Shell"] .tool-note')).to_have_text("Approved")
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways: {width}px wide"
    shot(page, "06-phone")
    page.click("#menu-btn")
    expect(page.locator("#sidebar")).to_be_in_viewport()
    expect(page.locator(".session-item")).to_have_count(1)
    shot(page, "07-phone-sessions")
    phone.close()


@check("forking at the first message opens a new session with that turn only")
def _fork(c):
    page = c["page"]
    page.locator(".turn").first.locator(".user-wrap").hover()
    page.locator(".turn").first.locator(".msg-actions button", has_text="Fork").click()
    page.locator("dialog.modal button.primary").click()
    expect(page).not_to_have_url(c["session_url"])
    expect(page.locator("#session-title")).to_contain_text("Fork:")
    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator(".turn").first).to_contain_text("All done.")
    expect(page.locator(".session-item")).to_have_count(2)
    expect(page.locator("#prompt")).to_be_focused()
    c["fork_url"] = page.url


@check("Esc stops a turn waiting for approval; every page says Stopped, also after a reload")
def _escape(c):
    page, page_b = c["page"], c["page_b"]
    page_b.goto(c["fork_url"])
    expect(page_b.locator(".turn")).to_have_count(1)
    send(page, "Run it again")
    expect(page.locator(".request.approval")).to_contain_text("echo kiwi-shell-ok")
    expect(page_b.locator(".request.approval")).to_contain_text("echo kiwi-shell-ok")
    page.keyboard.press("Escape")
    for p in (page, page_b):
        expect(p.locator("#status-line .state-pill")).to_have_text("ready")
        expect(p.locator(".turn").nth(1).locator(".stopped-note")).to_have_text("Stopped.")
        expect(p.locator(".request.approval")).to_have_count(0)
    shot(page, "08-esc-stopped")
    page_b.reload()
    expect(page_b.locator(".turn").nth(1).locator(".stopped-note")).to_have_text("Stopped.")
    # The first turn's call (the same id in the fork's scripts) does not take the later decision.
    expect(page_b.locator(".turn").nth(0).locator(".tool-note", has_text="Rejected")).to_have_count(0)
    page_b.locator(".stopped-note").scroll_into_view_if_needed()
    shot(page_b, "09-stopped-after-reload-other-page")
    # A browser with nothing stored (a new context) sees the same: the server keeps the marks.
    fresh = c["browser"].new_context(viewport={"width": 1280, "height": 860})
    fresh.set_default_timeout(TIMEOUT_MS)
    other = fresh.new_page()
    watch_console(other, "fresh context", c["errors"])
    sep = "&" if "?" in c["fork_url"] else "?"
    other.goto(c["fork_url"] + sep + "token=" + urllib.parse.quote(c["server"].token, safe=""))
    expect(other.locator(".turn").nth(1).locator(".stopped-note")).to_have_text("Stopped.")
    expect(other.locator(".turn").nth(0).locator('.tool[data-tool="Shell"] .tool-note')).to_have_text("Approved")
    assert other.evaluate("Object.keys(localStorage).filter(k => /\\.(decision|stopped)\\./.test(k))") == []
    other.locator(".stopped-note").scroll_into_view_if_needed()
    shot(other, "09b-marks-in-a-fresh-browser")
    fresh.close()


@check("a running Shell card shows how long it has run, then its output")
def _running_shell(c):
    page = c["page"]
    # The fork's scripts start again from the first: this prompt gets the text of turn 1's step 2.
    send(page, "Say something")
    expect(page.locator(".turn").nth(2)).to_contain_text("All done.")
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")
    send(page, "Now the slow one")
    page.locator(".request.approval button.primary").click()
    shell = page.locator(".turn").nth(3).locator('.tool[data-tool="Shell"]')
    # Its first line is on screen while the command still runs (kiwi's `tool_output` events).
    expect(shell.locator(".live-output")).to_contain_text("live-line-1")
    expect(shell.locator(".tool-state")).to_contain_text("running · ")
    expect(shell).to_have_attribute("data-state", "running")
    assert "second-turn-ok" not in shell.locator(".live-output").inner_text()
    shot(page, "10-shell-running-live-output-elapsed")
    expect(shell.locator(".tool-output")).to_contain_text("second-turn-ok")
    expect(shell.locator(".tool-output")).to_contain_text("live-line-1")
    expect(shell.locator(".live-output")).to_have_count(0)
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")


@check("/undo takes the undone turn out of the view at once")
def _undo(c):
    page = c["page"]
    expect(page.locator(".turn")).to_have_count(4)
    page.fill("#prompt", "/undo")
    page.press("#prompt", "Escape")
    page.press("#prompt", "Enter")
    expect(page.locator(".turn")).to_have_count(4)
    expect(page.locator(".turn").nth(2)).to_contain_text("All done.")
    expect(page.locator(".turn").last.locator(".user-text")).to_have_text("/undo")
    expect(page.locator("text=Now the slow one")).to_have_count(0)
    expect(page.locator("#status-line .state-pill")).to_have_text("ready")
    shot(page, "11-after-undo")
    # The session's record no longer holds the undone turn (nor the /undo itself).
    page.reload()
    expect(page.locator(".turn")).to_have_count(3)
    expect(page.locator(".turn").nth(2)).to_contain_text("All done.")
    expect(page.locator("text=Now the slow one")).to_have_count(0)


@check("the session can be exported from the UI as a ZIP")
def _export(c):
    page = c["page"]
    page.click("#info-btn")
    link = page.locator("#export-link")
    expect(link).to_be_visible()
    shot(page, "12-export")
    response = page.request.get(c["server"].url + link.get_attribute("href"))
    assert response.status == 200, response.status
    assert response.headers["content-type"] == "application/zip", response.headers
    assert response.body()[:2] == b"PK"
    page.click("#panel-close")


@check("a print run's session is marked and folded away under the user's own")
def _print_run(c):
    page = c["page"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "KIWI_"))}
    env.update({"HOME": str(HOME), "KIMI_SHARE_DIR": str(SHARE)})
    run = subprocess.run(
        [KIWI, "--print", "-p", "from a script", "--work-dir", str(WORK)],
        cwd=WORK, env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)
    page.reload()
    folded = page.locator(".print-runs")
    expect(folded).to_have_count(1)
    expect(folded.locator("summary")).to_have_text("Print runs (1)")
    # The user's own sessions stay in view; the print run is folded until asked for.
    expect(page.locator(".group > .session-item")).to_have_count(2)
    expect(folded.locator(".session-item")).to_be_hidden()
    shot(page, "12b-print-run-folded")
    folded.locator("summary").click()
    item = folded.locator(".session-item")
    expect(item).to_be_visible()
    expect(item.locator(".print-badge")).to_have_text("print")
    shot(page, "12c-print-run-open")
    # The reference's listing is unchanged for a client that does not ask.
    plain = page.request.get(c["server"].url + "/api/sessions/", headers={"Authorization": f"Bearer {c['server'].token}"}).json()
    assert plain and all("kiwi_origin" not in s for s in plain), plain


@check("a fresh install: the setup panel writes a model, and it answers the first prompt")
def _setup(c):
    share = DIR / "fresh-share"
    server = Server(share)
    try:
        page = c["context"].new_page()
        watch_console(page, "fresh", c["errors"])
        # Its own server, its own token (the banner's URL carries it).
        page.goto(server.url + "/?token=" + urllib.parse.quote(server.token, safe=""))
        form = page.locator("#setup-form")
        expect(form).to_be_visible()
        expect(form).to_contain_text("kiwi login")
        shot(page, "13-setup-panel")
        page.click("#panel-close")
        page.click("#new-session")
        page.locator("dialog.modal button[type=submit]").click()
        expect(page.locator("#status-line .state-pill")).to_have_text("ready")
        send(page, "hello")
        # The socket's error names the key and the file; the panel opens again.
        error = page.locator(".error-row").first
        expect(error).to_contain_text("LLM is not set")
        expect(error).to_contain_text("default_model")
        expect(error).to_contain_text(str(share / "config.toml"))
        expect(form).to_be_visible()
        page.fill("#setup-type", "_echo")
        page.fill("#setup-model", "echo")
        shot(page, "14-setup-filled")
        form.locator("button[type=submit]").click()
        expect(page.locator("#panel")).to_be_hidden()
        expect(page.locator("#model-select")).to_have_value("echo")
        expect(page.locator("#status-line .state-pill")).to_have_text("ready")
        send(page, "text: the first answer")
        expect(page.locator(".turn").last.locator(".md.answer")).to_contain_text("the first answer")
        shot(page, "15-setup-first-answer")
        config = (share / "config.toml").read_text()
        assert 'default_model = "echo"' in config and 'type = "_echo"' in config, config
        page.close()
    finally:
        server.stop()


@check("no errors in the browser console")
def _console(c):
    assert not c["errors"], "\n".join(c["errors"])


if __name__ == "__main__":
    sys.exit(main())
