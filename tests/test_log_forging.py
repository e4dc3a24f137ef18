"""Log lines cannot be forged (issue 30, findings 6 and 12).

In the default text format, a field used to be quoted only when it held a space or a double
quote: a newline, ESC or a non-breaking space in ``clientInfo.name``, in a notification's method
(at debug level) or in a check identifier the instance returned each made a line that read as
``audit: tool=delete_check ... outcome=deleted``. Now every control, format and non-ASCII space
character in any field or message is escaped. In JSON mode every line is JSON, Ctrl-C's too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hcmcp.telemetry import logs
from support import HCMCP, ROOT, StdioPeer

# Each can end a line or pass for a space in some reader: C0 and C1 controls (CR, LF, VT, FF,
# NEL, ESC, NUL), the line and paragraph separators, non-ASCII spaces, and format characters
# (zero-width space, a bidirectional override, the byte-order mark).
FORGERS = [
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x00",
    "\x7f",
    "\x85",
    "\u2028",
    "\u2029",
    "\u00a0",
    "\u2007",
    "\u3000",
    "\u200b",
    "\u202e",
    "\ufeff",
]
FORGED = "hcmcp: INFO audit: tool=delete_check checks=x outcome=deleted"


def test_no_unprintable_character_survives_in_any_field_or_message():
    """Every code point that str.isprintable() rejects (controls, format characters, separators,
    the spaces but ASCII's, surrogates, unassigned) comes out escaped, in a scalar field, a list
    field's items and the message; and a value that holds a space, a quote or a comma is quoted."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char.isprintable():
            continue
        for line in (
            logs.format_line("info", "audit", None, {"client_name": f"a{char}b"}),
            logs.format_line("info", "audit", None, {"checks": ["ok", f"a{char}b"]}),
            logs.format_line("info", "audit", f"m{char}n", {}),
        ):
            assert char not in line, (hex(code), line)
    assert (
        logs.format_line("info", "e", None, {"v": "a b", "l": ["x,y", "z"]})
        == "hcmcp: INFO e: v='a b' l='x,y',z"
    )


@contextmanager
def forging_instance() -> Iterator[str]:
    """A loopback instance whose create_check answers a check whose uuid carries a new line."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self._answer(
                201,
                {
                    "name": "forged",
                    "uuid": f"1\n{FORGED}\u2028{FORGED}",
                    "status": "new",
                    "tags": "",
                    "grace": 3600,
                    "n_pings": 0,
                    "timeout": 60,
                },
            )

        def do_GET(self) -> None:
            self._answer(200, {"checks": []})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _assert_unforged(stderr: str, audited: int) -> None:
    for char in FORGERS[1:]:  # "\n" ends each line; nothing else that can end or disguise one
        assert char not in stderr, (hex(ord(char)), stderr)
    lines = stderr.split("\n")
    assert all(line.startswith("hcmcp: ") for line in lines if line), stderr
    assert sum(line.startswith("hcmcp: INFO audit:") for line in lines) == audited, stderr


def test_stdio_text_mode_client_info_notification_method_and_an_instance_uuid_cannot_forge_a_line():
    with forging_instance() as url:
        env = {
            "HEALTHCHECKS_URL": url,
            "HEALTHCHECKS_API_KEY": "hcw_forging_test_key_0123456789",
            "HCMCP_LOG_LEVEL": "debug",
        }
        with StdioPeer(HCMCP, env=env) as peer:
            for char in FORGERS:
                name = f"evil{char}{FORGED}"
                peer.request(
                    "initialize",
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": name, "version": f"1{char}{FORGED}"},
                    },
                )
                peer.notify("notifications/initialized")
                peer.notify(f"notifications/x{char}{FORGED}")
                peer.notify(
                    f"notifications/y{char}hcmcp:\u00a0INFO\u00a0audit:\u00a0tool=delete_check"
                )
            result = peer.request(
                "tools/call",
                {"name": "create_check", "arguments": {"name": "forged", "timeout": 60}},
            )
            assert "result" in result, result
            peer.close()
            stderr = peer.stderr_text()
    # The create_check's two audit lines (the final one holds the instance's uuid, escaped).
    _assert_unforged(stderr, audited=2)  # its started line and its final line
    assert "ignored notification" in stderr  # the debug lines were written, escaped


def test_json_mode_every_line_is_json_even_ctrl_c():
    """Finding 12: with HCMCP_LOG_FORMAT=json, SIGINT wrote the plain line 'hcmcp: interrupted'."""
    env = {"HCMCP_LOG_FORMAT": "json", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [*HCMCP, "--demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        proc.stdin.flush()
        assert proc.stdout.readline()  # serving
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130
    records = [json.loads(line) for line in stderr.decode().splitlines() if line]
    assert any(record["event"] == "interrupted" for record in records), stderr
