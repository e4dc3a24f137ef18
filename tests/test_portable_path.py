"""The portable path (issue 31): hcmcp serving with the POSIX-only primitives taken away.

Windows has no ``select.poll`` (its ``select`` waits on sockets only, never on stdin), no signal
wakeup pipe the waits could watch, no ``add_signal_handler`` and no ``add_reader`` on its default
(proactor) event loop. hcmcp/portable.py chooses by capability, so here, on Linux, a
``sitecustomize`` takes exactly those away before hcmcp starts, in the real process: ``select.poll``
and ``signal.set_wakeup_fd`` deleted, ``select.select`` (and so every selector, the event loop's and
anyio's selector thread's) refusing anything but a socket as Windows' does, and the event loop's ``add_reader``/``add_writer``/
``add_signal_handler`` raising NotImplementedError as the proactor loop's do. Code that still used
one of them would die with an AttributeError or NotImplementedError (the same tests against the
tree before issue 31 fail so). What is served through it: initialize, tools/list, a tools/call,
a cancellation, stdin EOF and SIGTERM, over stdio and --http, from the source tree and from the .pyz.

This exercises the Windows code path on Linux; it is not a run on Windows (none is reachable here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support import FIXTURE, HCMCP, PY, StdioPeer, assert_sigterm_exits_promptly, cache_env
from support.http_transport import LEGACY, initialize_params, rpc
from support.served import Served, clean_env

SITECUSTOMIZE = """
import os, select, selectors, signal, stat, _signal
del select.poll
del signal.set_wakeup_fd
del _signal.set_wakeup_fd
_select = select.select

def _sockets_only(*args):
    for item in (*args[0], *args[1], *args[2]):
        fd = item if isinstance(item, int) else item.fileno()
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(10038, "select() on Windows waits on sockets only", fd)
    return _select(*args)

select.select = _sockets_only
selectors.SelectSelector._select = staticmethod(_sockets_only)
selectors.DefaultSelector = selectors.SelectSelector  # as on Windows: no epoll, no poll
import asyncio

def _refuse(*args, **kwargs):
    raise NotImplementedError  # as asyncio's proactor loop (Windows) refuses them

for _name in ("add_reader", "add_writer", "add_signal_handler"):
    setattr(asyncio.SelectorEventLoop, _name, _refuse)
"""

# Reported by the server process itself: proof that the sitecustomize ran there, and what the
# capability checks of hcmcp/portable.py read.
PROBE = (
    "import select, signal, hcmcp.portable as p; "
    "print(hasattr(select, 'poll'), hasattr(signal, 'set_wakeup_fd'), "
    "p.POLL, p.SIGNAL_WAKEUP, p.LOOP_SIGNALS)"
)


@pytest.fixture(scope="module")
def windowsish(tmp_path_factory) -> dict[str, str]:
    """The environment of a server that must take the portable path."""
    folder: Path = tmp_path_factory.mktemp("windowsish")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": str(folder), **cache_env()}


def test_the_sitecustomize_takes_the_primitives_away_and_portable_sees_it(windowsish):
    done = subprocess.run(
        [PY, "-c", PROBE],
        env={**os.environ, **windowsish},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.split() == ["False", "False", "False", "False", "False"], done.stderr


def _session(peer: StdioPeer) -> None:
    """initialize, tools/list and a tools/call of the demo."""
    assert peer.initialize()["result"]["serverInfo"]["name"] == "hcmcp"
    tools = {tool["name"] for tool in peer.request("tools/list")["result"]["tools"]}
    assert "list_checks" in tools
    result = peer.request("tools/call", {"name": "list_checks", "arguments": {}})["result"]
    assert result["structuredContent"]["checks"], result


def test_stdio_demo_serves_and_ends_at_stdin_eof(windowsish):
    with StdioPeer([*HCMCP, "--demo"], env=windowsish) as peer:
        _session(peer)
        started = time.monotonic()
        assert peer.close() == 0, peer.stderr_text()
        assert time.monotonic() - started < 3
        assert "Traceback" not in peer.stderr_text()


def test_stdio_cancellation_and_concurrency(windowsish):
    with StdioPeer(FIXTURE, env=windowsish) as peer:
        peer.initialize()
        peer.send(rpc("tools/call", {"name": "sleep_forever", "arguments": {}}, "slow"))
        assert peer.request("ping", id="p1")["result"] == {}  # read while the call runs
        peer.notify("notifications/cancelled", {"requestId": "slow", "reason": "test"})
        assert peer.request("ping", id="p2")["result"] == {}
        assert peer.no_output(0.3), "a cancelled request must not be answered"
        assert peer.close() == 0, peer.stderr_text()


def test_stdio_sigterm_while_reading_exits_0(windowsish):
    """SIGTERM on the synchronous read (no wakeup pipe: the wait wakes on a timer)."""
    assert_sigterm_exits_promptly([*HCMCP, "--demo"], attempts=3, env=windowsish)


def test_stdio_sigterm_during_a_call_lets_it_finish_then_exits_0(windowsish):
    """SIGTERM on the event loop (no add_signal_handler: portable.signal_receiver's handler)."""
    with StdioPeer(FIXTURE, env=windowsish) as peer:
        peer.initialize()
        peer.send(rpc("tools/call", {"name": "sleep", "arguments": {"seconds": 0.5}}, 7))
        time.sleep(0.2)
        peer.proc.send_signal(signal.SIGTERM)
        answer = peer.read_response(7)
        assert "result" in answer, answer
        assert peer.proc.wait(10) == 0


def _post(served: Served, message: dict, headers: dict | None = None) -> tuple[int, dict, list]:
    return served.post(message, {"MCP-Protocol-Version": LEGACY, **(headers or {})})


def _http_session(served: Served) -> None:
    status, headers, messages = served.post(rpc("initialize", initialize_params()))
    assert status == 200 and messages[0]["result"]["serverInfo"]["name"] == "hcmcp"
    session = {"Mcp-Session-Id": headers["mcp-session-id"]}
    assert (
        _post(served, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)[0] == 202
    )
    status, _, messages = _post(served, rpc("tools/list", id=2), session)
    assert status == 200 and messages[0]["result"]["tools"]
    status, _, messages = _post(
        served, rpc("tools/call", {"name": "list_checks", "arguments": {}}, id=3), session
    )
    assert status == 200 and messages[0]["result"]["structuredContent"]["checks"], messages


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_http_demo_serves_and_stops_on_a_signal(windowsish, signal_number):
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], clean_env(**windowsish)) as served:
        _http_session(served)
        code = served.stop(signal_number)
        assert code == (0 if signal_number == signal.SIGTERM else 130), "".join(served.stderr)
        assert "Traceback" not in "".join(served.stderr)


def test_the_pyz_serves_stdio_and_http(windowsish):
    from pyz_build import built_pyz

    command = [PY, str(built_pyz())]  # not -I: that would ignore PYTHONPATH's sitecustomize
    with StdioPeer([*command, "--demo"], env=windowsish) as peer:
        _session(peer)
        assert peer.close() == 0, peer.stderr_text()
    with Served([*command, "--http", "127.0.0.1:0", "--demo"], clean_env(**windowsish)) as served:
        _http_session(served)
        assert served.stop() == 0, "".join(served.stderr)
    probe = subprocess.run(
        [*command[:1], "-c", PROBE],
        env={**os.environ, **windowsish},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.stdout.split()[:2] == ["False", "False"], probe.stderr


def test_json_lines_are_the_only_stdout(windowsish):
    """Nothing but JSON-RPC on stdout on the portable path either (no stray thread output)."""
    with StdioPeer([*HCMCP, "--demo"], env=windowsish) as peer:
        peer.initialize()
        peer.close()
        rest = peer.proc.stdout.read() if peer.proc.stdout else b""
    for line in rest.splitlines():
        json.loads(line)


def test_the_delete_prompt_reads_the_terminal_through_a_thread(windowsish):
    """hcmcp call's dialog: stdin (a terminal) read by a worker thread, not waited on."""
    import pty
    import select as select_module

    listed = subprocess.run(
        [*HCMCP, "call", "list_checks", "--demo"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **windowsish},
        timeout=30,
        check=True,
    )
    uuid = json.loads(listed.stdout)["checks"][0]["uuid"]
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*HCMCP, "call", "delete_check", json.dumps({"check": uuid}), "--demo"],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, **windowsish},
    )
    os.close(secondary)
    seen = b""
    try:
        deadline = time.monotonic() + 20
        while b"deletes nothing): " not in seen:
            assert time.monotonic() < deadline, seen
            if select_module.select([primary], [], [], 0.2)[0]:
                seen += os.read(primary, 4096)
        os.write(primary, b"no\n")
        code = proc.wait(10)
        result = json.loads(proc.stdout.read())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
    assert b"Traceback" not in seen
    assert code != 0 and "declined" in json.dumps(result).lower(), (code, result)
