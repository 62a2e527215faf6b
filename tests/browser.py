"""Open a page in headless Chromium as a person would, and report what went wrong.

Talks to Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: commands on
fd 3, answers on fd 4, each a JSON message ended by a NUL byte), so no port and no websocket
library are needed. Collects failed requests, requests to anything but the page's own file,
console errors and uncaught exceptions, and can take a screenshot.

    python -m tests.browser report.html [--screenshot out.png]
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageReport:
    requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    def foreign_requests(self, page_url: str) -> list[str]:
        """Requests for anything but the page itself."""
        return [u for u in self.requests if u != page_url]


class Chromium:
    def __init__(self, width: int = 1280, height: int = 900) -> None:
        program = chromium_path()
        if program is None:
            raise RuntimeError("chromium is not installed")
        self.profile = tempfile.mkdtemp(prefix="howfast-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        argv = [program, *FLAGS, f"--user-data-dir={self.profile}"]
        argv += [f"--window-size={width},{height}", "about:blank"]

        def child_fds() -> None:  # chromium reads commands on fd 3, writes answers on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.process = subprocess.Popen(
            argv,
            pass_fds=(3, 4),
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = self._attach()

    def _send(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, page: bool = True
    ) -> dict[str, Any]:
        request = self._send(method, params, self.session if page else None)
        deadline = time.monotonic() + 60
        while True:
            message = self._read(deadline)
            if message.get("id") == request:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def _attach(self) -> str:
        self.session = ""
        targets = self.call("Target.getTargets", page=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, page=False
        )
        session: str = attached["sessionId"]
        return session

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str, timeout: float = 60) -> PageReport:
        """Load `url` and wait until the JavaScript expression `ready` is true."""
        self.session = self._attach() if not self.session else self.session
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"Boolean({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not ready after {timeout} s ({ready})")
            time.sleep(0.2)
        return self._report()

    def _report(self) -> PageReport:
        report = PageReport()
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                report.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                report.failed_requests.append(f"{params.get('errorText')} ({params['type']})")
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                report.console_errors.append(json.dumps(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                report.console_errors.append(params["entry"].get("text", ""))
            elif method == "Runtime.exceptionThrown":
                report.exceptions.append(json.dumps(params["exceptionDetails"])[:500])
        return report

    def screenshot(self, path: Path, full_height: int | None = None) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_height:
            params["clip"] = {"x": 0, "y": 0, "width": 1280, "height": full_height, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._send("Browser.close", None, None)
            self.process.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


REPORT_READY = "window.__howfast && window.__howfast.ready"


def check_report(path: Path, screenshot: Path | None = None) -> tuple[PageReport, dict[str, Any]]:
    """Open a howfast HTML report, draw every chart, and return what happened."""
    url = path.resolve().as_uri()
    with Chromium() as browser:
        report = browser.open(url, REPORT_READY)
        browser.evaluate("window.__howfast.drawAll()")
        state = browser.evaluate(
            "({total: window.__howfast.total, drawn: window.__howfast.drawn,"
            " failed: window.__howfast.failed, errors: window.__howfastErrors,"
            " svgs: document.querySelectorAll('.plot .main-svg').length,"
            " drawnMarks: document.querySelectorAll('.plot[data-state=drawn]').length})"
        )
        if screenshot is not None:
            browser.evaluate("window.scrollTo(0, 0)")
            browser.screenshot(screenshot, full_height=1600)
        report = browser._report()
    return report, state


if __name__ == "__main__":
    target = Path(sys.argv[1])
    shot = Path(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--screenshot" else None
    page, page_state = check_report(target, shot)
    print(json.dumps({"page": page.__dict__, "state": page_state}, indent=2))
