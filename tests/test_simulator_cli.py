"""``python -m hcmcp.simulator.simulator``: banner, serving, seeds, flood, SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest

from hcmcp.simulator.simulator import Simulator

COMMAND = [sys.executable, "-m", "hcmcp.simulator.simulator"]


def start(*args: str) -> tuple[subprocess.Popen, str, dict[str, str]]:
    proc = subprocess.Popen(
        [*COMMAND, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    keys = {}
    while line := proc.stdout.readline().strip():  # a blank line ends the banner
        name, _, value = line.partition("=")
        keys[name] = value
    return proc, url, keys


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()


# No proxy from the environment: these requests go to 127.0.0.1 and nowhere else.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url: str, key: str) -> bytes:
    request = urllib.request.Request(url, headers={"X-Api-Key": key})
    with OPENER.open(request, timeout=10) as answer:
        return answer.read()


def test_it_prints_its_url_and_keys_serves_the_seed_and_stops_on_sigterm():
    proc, url, keys = start("--seed", "recordings")
    try:
        assert url.startswith("http://127.0.0.1:") and int(url.rsplit(":", 1)[1]) > 0
        assert keys == {
            name: getattr(Simulator, name)
            for name in ("RW_KEY", "RO_KEY", "OTHER_RW_KEY", "OTHER_RO_KEY", "WRONG_KEY")
        }
        checks = json.loads(get(f"{url}/api/v3/checks/", keys["RW_KEY"]))["checks"]
        assert [c["name"] for c in checks][:2] == ["Backups", "DB dump"]
        assert checks[0]["ping_url"] == f"{url}/ping/{checks[0]['uuid']}"  # its own address
    finally:
        assert stop(proc) == 0
    assert proc.stderr is not None and proc.stderr.read() == ""


@pytest.mark.parametrize(("args", "count"), [((), 9), (("--seed", "bulk:250"), 250)])
def test_seeds(args, count):
    proc, url, keys = start(*args)
    try:
        assert len(json.loads(get(f"{url}/api/v3/checks/", keys["RW_KEY"]))["checks"]) == count
    finally:
        stop(proc)


def test_flood():
    proc, url, keys = start("--flood", "200000")
    try:
        body = get(f"{url}/api/v3/checks/", keys["RW_KEY"])
        assert len(body) == 200_000 and json.loads(body)["checks"]
    finally:
        stop(proc)


def test_a_bad_seed_is_explained():
    done = subprocess.run([*COMMAND, "--seed", "lots"], capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "not one of demo, recordings, bulk:N" in done.stderr
