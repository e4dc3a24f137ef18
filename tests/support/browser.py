"""Debian's chromium, headless, driven by Debian's chromedriver over the W3C WebDriver protocol.

    with Browser.start() as browser:          # chromium and chromedriver on PATH, else skip/fail
        browser.get(url); browser.find("#key").type("hcw_..."); browser.find("#approve").click()

WebDriver is plain JSON over HTTP on loopback, so this speaks it with http.client (about a dozen
commands) instead of pinning selenium: selenium's current release needs a newer certifi than the
package index this project builds from offers, and the dozen commands are all the tests use.
chromedriver listens on 127.0.0.1 at a port it chooses (--port=0, read from its banner); chromium
runs with a fresh --user-data-dir and every flag that keeps it off the network (no component
updates, no sync, no QUIC, no background fetches), so it talks only to the loopback pages it is sent to,
and with JavaScript off for every page (what is tested must work without it).
Outside CI a missing chromium skips with one apt-get line; under CI=true it fails (system_servers).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from system_servers import require

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--window-size=820,900",
]
START_TIMEOUT = 30.0


class WebDriverError(AssertionError):
    """A command chromedriver refused: its W3C error name and message."""


class Element:
    def __init__(self, browser: Browser, ref: str) -> None:
        self.browser, self.ref = browser, ref

    def _path(self, tail: str) -> str:
        return f"/element/{self.ref}/{tail}"

    def type(self, text: str) -> None:
        self.browser.command("POST", self._path("value"), {"text": text})

    def click(self) -> None:
        self.browser.command("POST", self._path("click"), {})

    @property
    def text(self) -> str:
        return str(self.browser.command("GET", self._path("text")))

    def attribute(self, name: str) -> str | None:
        value = self.browser.command("GET", self._path(f"attribute/{name}"))
        return None if value is None else str(value)

    def reference(self) -> dict[str, str]:
        return {ELEMENT: self.ref}


class Browser:
    """One chromedriver session on one headless chromium."""

    def __init__(self, port: int, session: str) -> None:
        self.port, self.session = port, session

    @classmethod
    @contextmanager
    def start(cls) -> Iterator[Browser]:
        chromium = require("chromium", apt="chromium chromium-driver")
        driver = require("chromedriver", apt="chromium-driver")
        profile = tempfile.mkdtemp(prefix="hcmcp-chromium-")
        proc = subprocess.Popen(
            [driver, "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            port = _banner_port(proc)
            options = {
                "binary": chromium,
                "args": [*FLAGS, f"--user-data-dir={profile}"],
                # the pages under test must work without JavaScript: it is off for every page
                "prefs": {"profile.managed_default_content_settings.javascript": 2},
            }
            capabilities = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
            created = _call(port, "POST", "/session", {"capabilities": capabilities})
            browser = cls(port, created["sessionId"])
            try:
                yield browser
            finally:
                _call(port, "DELETE", f"/session/{browser.session}", None)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            shutil.rmtree(profile, ignore_errors=True)

    def command(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return _call(self.port, method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self.command("POST", "/url", {"url": url})

    @property
    def url(self) -> str:
        return str(self.command("GET", "/url"))

    @property
    def source(self) -> str:
        return str(self.command("GET", "/source"))

    def find(self, css: str) -> Element:
        found = self.command("POST", "/element", {"using": "css selector", "value": css})
        return Element(self, found[ELEMENT])

    def find_all(self, css: str) -> list[Element]:
        found = self.command("POST", "/elements", {"using": "css selector", "value": css})
        return [Element(self, item[ELEMENT]) for item in found]

    def into_frame(self, frame: Element) -> None:
        self.command("POST", "/frame", {"id": frame.reference()})

    def out_of_frame(self) -> None:
        self.command("POST", "/frame/parent", {})

    def resize(self, width: int, height: int) -> None:
        self.command("POST", "/window/rect", {"width": width, "height": height})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.command("GET", "/screenshot"))

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "the page") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what} (at {self.url})"
            time.sleep(0.05)


def _banner_port(proc: subprocess.Popen[str]) -> int:
    """chromedriver's port from its 'started successfully on port N' line (read in a thread so a
    silent chromedriver fails the test after START_TIMEOUT instead of hanging it)."""
    found: list[int] = []
    seen: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            match = re.search(r"started successfully on port (\d+)", line)
            if match:
                found.append(int(match.group(1)))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    assert found, f"chromedriver did not start: {''.join(seen)[-2000:]}"
    # keep draining its output so a chatty chromedriver never blocks on a full pipe
    threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True).start()
    return found[0]


def _call(port: int, method: str, path: str, body: dict[str, Any] | None) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        answer = json.loads(response.read() or b"{}")
    finally:
        connection.close()
    value = answer.get("value")
    if response.status != 200:
        error = value.get("error") if isinstance(value, dict) else None
        message = value.get("message", "") if isinstance(value, dict) else value
        raise WebDriverError(f"{method} {path}: {error}: {str(message)[:500]}")
    return value
