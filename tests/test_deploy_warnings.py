"""The start-up lines about how the instance is reached: plain http to a host that is not loopback
(the key would cross the network in clear), each exactly once, and none where nothing is wrong."""

from __future__ import annotations

import subprocess

import pytest

from deploy_support import hcmcp_env
from hcmcp.config.settings import load
from support import HCMCP, ROOT


def startup_stderr(**env: str) -> str:
    url = env.pop("url")
    proc = subprocess.run(
        [*HCMCP, "tools"], env=hcmcp_env(url, **env), capture_output=True, cwd=ROOT, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.decode()


@pytest.mark.parametrize(
    "url", ["http://hc.example.com", "http://10.1.2.3:8000/hc", "http://[2001:db8::1]:80"]
)
def test_plain_http_to_another_host_makes_one_note(url):
    notes = load({"HEALTHCHECKS_URL": url}).startup_notes
    assert len(notes) == 1 and "plain http" in notes[0] and "in clear" in notes[0]
    assert url.split("://")[1].split("/")[0] in notes[0]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000",
        "http://localhost:8000",
        "http://[::1]:8000",
        "http://127.1.2.3",
        "https://hc.example.com",
        "http://hc.localhost",
    ],
)
def test_loopback_or_https_makes_none(url):
    assert load({"HEALTHCHECKS_URL": url}).startup_notes == ()


def test_the_server_prints_each_line_once_at_start():
    assert startup_stderr(url="http://127.0.0.1:8000") == ""
    stderr = startup_stderr(
        url="http://hc.example.com", HEALTHCHECKS_INSECURE_TLS="true", HTTP_PROXY="http://p:1"
    )
    lines = stderr.splitlines()
    assert len(lines) == 3 and len(set(lines)) == 3, lines
    assert sum("plain http" in line for line in lines) == 1
    assert (
        sum(
            "HEALTHCHECKS_INSECURE_TLS is ignored: HEALTHCHECKS_URL is http://" in line
            for line in lines
        )
        == 1
    )


def test_the_demo_prints_none_of_them_only_that_it_ignores_them():
    proc = subprocess.run(
        [*HCMCP, "tools", "--demo"],
        env=hcmcp_env("http://hc.example.com", HTTP_PROXY="http://p:1"),
        capture_output=True,
        cwd=ROOT,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().splitlines() == [
        "hcmcp: --demo uses its built-in simulated instance, so HEALTHCHECKS_API_KEY, HEALTHCHECKS_URL and "
        "HTTP_PROXY are ignored."
    ]
