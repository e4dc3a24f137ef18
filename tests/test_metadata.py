"""What users and registries read about hcmcp agrees with the code: one version, one list of variables.

server.json is checked against the shape the MCP registry documents for its 2025-12-11 schema (no
copy of the schema ships in a package we can install, so the shape is written out here), and
against hcmcp/config/settings.py and docs/configuration.md: every variable the server reads is declared, with isSecret
exactly on the secrets, and a declared default changes nothing when set.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib

import jsonschema

import hcmcp
from hcmcp.config.settings import load
from pyz_build import built_pyz
from support import ROOT

# The keys, and the proxy URLs (they may hold user:password@).
SECRETS = {
    "HEALTHCHECKS_API_KEY",
    "HEALTHCHECKS_STATE_KEY",
    "HEALTHCHECKS_HTTP_TOKEN",
    "HTTPS_PROXY",
    "http_proxy",
    "ALL_PROXY",
}

VARIABLE = {
    "type": "object",
    "required": ["name", "description"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "description": {"type": "string", "minLength": 1},
        "isRequired": {"type": "boolean"},
        "isSecret": {"type": "boolean"},
        "default": {"type": "string"},
        "value": {"type": "string"},
        "format": {"enum": ["string", "number", "boolean", "filepath"]},
        "choices": {"type": "array", "items": {"type": "string"}},
    },
}
PACKAGE = {
    "type": "object",
    "required": ["registryType", "identifier", "transport"],
    "additionalProperties": False,
    "properties": {
        "registryType": {"enum": ["npm", "pypi", "nuget", "oci", "mcpb"]},
        "registryBaseUrl": {"type": "string", "pattern": "^https://"},
        "identifier": {"type": "string", "minLength": 1},
        "version": {"type": "string", "minLength": 1},
        "runtimeHint": {"type": "string"},
        "transport": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}},
        },
        "runtimeArguments": {"type": "array"},
        "packageArguments": {"type": "array"},
        "environmentVariables": {"type": "array", "items": VARIABLE},
        "fileSha256": {"type": "string"},
    },
}
SERVER = {
    "type": "object",
    "required": ["name", "description", "version"],
    "additionalProperties": False,
    "properties": {
        "$schema": {
            "const": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
        },
        "name": {
            "type": "string",
            "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$",
            "maxLength": 200,
        },
        "title": {"type": "string", "minLength": 1, "maxLength": 100},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {"type": "string", "maxLength": 255},
        "repository": {
            "type": "object",
            "required": ["url", "source"],
            "properties": {
                "url": {"type": "string", "pattern": "^https://"},
                "source": {"type": "string"},
                "id": {"type": "string"},
                "subfolder": {"type": "string"},
            },
        },
        "websiteUrl": {"type": "string", "pattern": "^https://"},
        "packages": {"type": "array", "items": PACKAGE},
        "remotes": {"type": "array"},
        "icons": {"type": "array"},
        "_meta": {"type": "object"},
    },
}


def server_json() -> dict:
    return json.loads((ROOT / "server.json").read_text())


def variables_read_by_the_server() -> set[str]:
    """Every variable hcmcp/config/*.py reads by name (the proxy variables are read in http/client/proxy.py)."""
    names = set()
    for module in sorted((ROOT / "hcmcp").glob("config/*.py")):
        names |= set(re.findall(r'env(?:\.get\(|\[)"([A-Za-z][A-Za-z0-9_]+)"', module.read_text()))
    return names


def readme_rows() -> list[set[str]]:
    """The names in the first column of each row of docs/configuration.md's table of variables."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    table = text[text.index("## Environment variables") :]
    end = table.find("\n## ", 1)
    table = table if end < 0 else table[:end]
    return [
        set(re.findall(r"`([A-Za-z][A-Za-z0-9_]+)`", line.split("|")[1]))
        for line in table.splitlines()
        if line.startswith("| `")
    ]


def test_server_json_has_the_registry_shape():
    doc = server_json()
    jsonschema.validate(doc, SERVER)
    kinds = {package["registryType"]: package for package in doc["packages"]}
    assert set(kinds) == {"pypi", "oci"}
    assert (
        kinds["pypi"]["identifier"]
        == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    )
    assert "version" not in kinds["oci"]  # the registry wants the version as the image's tag
    assert re.fullmatch(r"[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+:[\w.-]+", kinds["oci"]["identifier"])
    assert f"mcp-name: {doc['name']}" in (ROOT / "README.md").read_text()  # PyPI ownership proof


def test_every_variable_the_server_reads_is_declared_and_only_the_secrets_are_secret():
    documented = set().union(*readme_rows())
    assert variables_read_by_the_server() <= documented, (
        "docs/configuration.md's table lacks a variable hcmcp/config/*.py reads"
    )
    for package in server_json()["packages"]:
        declared = {variable["name"]: variable for variable in package["environmentVariables"]}
        assert set(declared) <= documented, (package["registryType"], set(declared) - documented)
        assert variables_read_by_the_server() <= set(declared)
        for row in readme_rows():
            assert row & set(declared), (
                package["registryType"],
                f"no variable of docs/configuration.md's row {sorted(row)}",
            )
        assert {name for name, v in declared.items() if v.get("isSecret")} == SECRETS
        assert all(
            v.get("isSecret") is False for name, v in declared.items() if name not in SECRETS
        )
        assert "ELICITATION" in declared


def test_a_declared_default_is_the_default():
    baseline = load({})
    for variable in server_json()["packages"][0]["environmentVariables"]:
        if "default" in variable:
            assert load({variable["name"]: variable["default"]}) == baseline, variable["name"]
            if "choices" in variable:
                assert variable["default"] in variable["choices"]


def test_one_version_everywhere(tmp_path):
    version = hcmcp.__version__
    env = {**os.environ, "HCMCP_PYZ_CACHE": str(tmp_path)}
    doc = server_json()
    assert doc["version"] == version
    assert [
        p["version"] if "version" in p else p["identifier"].rsplit(":", 1)[1]
        for p in doc["packages"]
    ] == [version] * 2
    # pyproject takes it from hcmcp/__init__.py
    assert importlib.metadata.version("hcmcp") == version
    assert f"\n## {version}\n" in (ROOT / "CHANGELOG.md").read_text()
    for argv in ([sys.executable, "-m", "hcmcp"], [sys.executable, str(built_pyz())]):
        done = subprocess.run(
            [*argv, "--version"], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0 and done.stdout == f"hcmcp {version}\n", (argv, done.stderr)
    hello = subprocess.run(
        [sys.executable, str(built_pyz())],
        capture_output=True,
        timeout=60,
        env=env,
        input=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ).encode(),
    )
    assert json.loads(hello.stdout.splitlines()[0])["result"]["serverInfo"]["version"] == version


def test_the_license_file_is_the_one_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License\n")
    assert "version" in project.get("dynamic", []) and "version" not in project


def test_server_json_and_the_dockerfile_name_the_same_architectures_and_the_pyz_platforms_built():
    """The image's architectures (server.json's publisher-provided _meta, the Dockerfile's header) and the
    .pyz's platforms (.ci/build-pyz's TARGETS) are named alike."""
    meta = server_json()["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]
    named = re.search(r"^# Architectures: ([^.]+)\.", (ROOT / "Dockerfile").read_text(), re.M)
    assert named and named.group(1).split(", ") == meta["architectures"]["oci"] == [
        "linux/amd64",
        "linux/arm64",
    ]
    build = (ROOT / ".ci" / "build-pyz").read_text()
    targets = re.findall(r'^    \("([^"]+)", \(', build, re.M)
    words = {
        "Linux": "linux",
        "macOS": "darwin",
        "Windows": "windows",
        "x86_64": "amd64",
        "aarch64": "arm64",
        "arm64": "arm64",
    }
    as_meta = [
        " ".join([f"{words[t.split()[0]]}/{words[t.split()[1]]}", *t.split()[2:]]) for t in targets
    ]
    assert as_meta == meta["platforms"]["pyz"], (as_meta, meta["platforms"]["pyz"])
