"""docs/clients.md's configurations start the server, as a client would start them (issue 28, item 5).

A client launches `command` with `args` and `env`, from no particular directory and without the
user's shell PATH. Each stdio configuration of the page is started that way, with the checkout's
venv (the interpreter running these tests: the README's own install) in place of
`/path/to/hcmcp/.venv`, a freshly built .pyz in place of `/opt/hcmcp/hcmcp.pyz`, and `--demo` added;
it must answer initialize and list the tools. A bare `"command": "hcmcp"` (not on PATH after the
README's install) is refused here, as is a pointer to a package index hcmcp is not published in.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from pyz_build import built_pyz
from support import ROOT, StdioPeer

PAGE = ROOT / "docs" / "clients.md"
VENV_PLACEHOLDER = "/path/to/hcmcp/.venv/bin/"
PYZ_PLACEHOLDER = "/opt/hcmcp/hcmcp.pyz"


def _servers() -> list[dict]:
    found = []
    for block in re.findall(r"```json\n(.*?)```", PAGE.read_text(), re.S):
        config = json.loads(block)
        for entry in {**config.get("mcpServers", {}), **config.get("servers", {})}.values():
            if "command" in entry:
                found.append(entry)
    return found


SERVERS = _servers()


def test_the_page_names_no_command_a_client_cannot_find():
    assert len(SERVERS) >= 4
    for entry in SERVERS:
        command = entry["command"]
        assert command.startswith("/") or command == "python3", entry  # never a bare "hcmcp"
    text = PAGE.read_text()
    assert "not published on PyPI" in text and "uvx hcmcp" in text  # said plainly, not offered


@pytest.mark.parametrize(
    "entry", SERVERS, ids=[" ".join([e["command"], *e.get("args", [])]) for e in SERVERS]
)
def test_each_configuration_starts_and_lists_the_tools(entry):
    venv_bin = Path(sys.executable).parent
    command = entry["command"].replace(VENV_PLACEHOLDER, f"{venv_bin}/")
    if command == "python3":
        command = sys.executable  # the machine's python3 (the venv's also runs a .pyz)
    args = [
        arg.replace(PYZ_PLACEHOLDER, str(built_pyz()) if PYZ_PLACEHOLDER in arg else arg)
        for arg in entry.get("args", [])
    ]
    assert os.path.isabs(command), command
    env = dict(entry.get("env", {}))  # (the session's HCMCP_PYZ_CACHE comes with the rest)
    with StdioPeer([command, *args, "--demo"], env=env) as peer:
        peer.initialize()
        tools = peer.request("tools/list")["result"]["tools"]
        assert "list_checks" in [tool["name"] for tool in tools]
        assert peer.close() == 0
        # the placeholder key and URL are the instance's: --demo ignores them, with one line
        assert "--demo uses its built-in simulated instance" in peer.stderr_text()
