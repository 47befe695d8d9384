"""The reference's own browser UI (kimi-cli 1.49.0, `kimi_cli/web/static/` of its wheel) against
`kiwi web`: a client written for `kimi web` must work unchanged.

Run by tests/suite/web_browser.rs with the same environment as check.py plus KIWI_REFERENCE_UI,
the extracted `static/` folder. The browser loads the reference's page and assets in place of
kiwi's own (Playwright answers `/`, `/assets/*` and `/logo.png` from the folder); every API call
and the WebSocket go to kiwi. It opens a session created over REST, sends a prompt, sees the
scripted answer, approves the shell command, sees the end of the turn, and reloads.
"""

import json
import mimetypes
import os
import pathlib
import re
import sys
import traceback
import urllib.parse
import urllib.request

from playwright.sync_api import expect, sync_playwright

from check import CHROMIUM, TIMEOUT_MS, WORK, Server, shot, write_config

STATIC = pathlib.Path(os.environ["KIWI_REFERENCE_UI"])


def serve_reference(route):
    path = "/" + route.request.url.split("://", 1)[1].split("/", 1)[1].split("?")[0]
    name = "index.html" if path == "/" else path.lstrip("/")
    f = (STATIC / name).resolve()
    if not str(f).startswith(str(STATIC.resolve())) or not f.is_file():
        return route.fulfill(status=404, body='{"detail":"Not Found"}', content_type="application/json")
    ctype = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
    return route.fulfill(body=f.read_bytes(), content_type=ctype)


def main():
    write_config()
    server = Server()
    errors = []
    try:
        req = urllib.request.Request(
            server.url + "/api/sessions/",
            data=json.dumps({"work_dir": str(WORK)}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.token}"},
            method="POST",
        )
        with urllib.request.urlopen(req) as r:
            session = json.load(r)
        with sync_playwright() as pw:
            # A page answered by Playwright has no known address space, so Chromium's Local
            # Network Access checks would block its socket to 127.0.0.1; kiwi's own checks
            # (Host, Origin) still apply.
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests"],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(TIMEOUT_MS)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            base = server.url
            page.route(re.compile(rf"^{re.escape(base)}/(\?.*)?$"), serve_reference)
            page.route(f"{base}/assets/**", serve_reference)
            page.route(f"{base}/logo.png", serve_reference)
            try:
                token = urllib.parse.quote(server.token, safe="")
                page.goto(f"{base}/?session={session['session_id']}&token={token}")
                box = page.locator("textarea").first
                expect(box).to_be_visible()
                # Its composer is ready once the session's socket reported its status.
                expect(page.get_by_text("Awaiting input").first).to_be_visible()
                page.wait_for_timeout(500)
                box.fill("Please say hello and run a command")
                box.press("Enter")
                expect(page.get_by_text("Hello from", exact=False).first).to_be_visible()
                expect(page.get_by_text("echo kiwi-shell-ok", exact=False).first).to_be_visible()
                approve = page.get_by_role("button", name="Approve", exact=False).first
                expect(approve).to_be_visible()
                shot(page, "10-reference-ui-approval")
                approve.click()
                expect(page.get_by_text("All done.", exact=False).first).to_be_visible()
                shot(page, "11-reference-ui-finished")
                page.reload()
                expect(page.get_by_text("All done.", exact=False).first).to_be_visible()
                expect(page.get_by_text("Please say hello and run a command").first).to_be_visible()
                shot(page, "12-reference-ui-reloaded")
            except Exception:  # noqa: BLE001 - reported with a screenshot
                shot(page, "failed-reference-ui")
                raise
            browser.close()
    except Exception:  # noqa: BLE001
        print(f"FAILED: the reference UI works against kiwi web\n{traceback.format_exc()}")
        print("kiwi web stderr (last lines):\n  " + "\n  ".join(server.err[-40:]))
        print("0 passed, 1 failed")
        return 1
    finally:
        server.stop()
    if errors:
        print("browser errors:\n  " + "\n  ".join(errors))
        print("0 passed, 1 failed")
        return 1
    print("ok: the reference UI works against kiwi web")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
