"""The start-up fast path (hcmcp/fast_start/) answers byte for byte as the full McpServer.handle.

Every line goes to both: the fast path either answers it with exactly the full path's bytes or
hands it over (and from then on the full path serves, with the same session state). Then the
same over real stdio, against the real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generated_files import copy_package, python_in, run_check
from hcmcp.config.parse import ConfigError
from hcmcp.config.settings import load
from hcmcp.fast_start import handshake
from hcmcp.fast_start import handshake as fast_start  # Handshake, DATA_FILE
from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.protocol.revisions import SUPPORTED
from hcmcp.protocol.server import Session
from hcmcp.protocol.stdio import LineWriter, _message_or_reply
from hcmcp.tools.assemble import build_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENVS = [
    {},
    {"HEALTHCHECKS_READ_ONLY": "true"},
    {"HEALTHCHECKS_ALLOW_TOOLS": "list_*,essential"},
    {"HEALTHCHECKS_DENY_TOOLS": "delete_check,pause_*"},
    {
        "HEALTHCHECKS_ALLOW_TOOLS": "essential",
        "HEALTHCHECKS_DENY_TOOLS": "get_check",
        "HEALTHCHECKS_READ_ONLY": "true",
    },
    {"ELICITATION": "false", "HEALTHCHECKS_URL": "http://127.0.0.1:9/prefix/api/v3/"},
]


def line(**message) -> bytes:
    return json.dumps(message).encode()


def init(revision, id=1, **extra) -> bytes:
    return line(
        jsonrpc="2.0",
        id=id,
        method="initialize",
        params={
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
            **extra,
        },
    )


INITIALIZED = line(jsonrpc="2.0", method="notifications/initialized")
TOOLS_LIST = line(jsonrpc="2.0", id=2, method="tools/list")


class Both:
    """The fast path and the full path, fed the same lines."""

    def __init__(self, env: dict[str, str]) -> None:
        config = load(env)
        self.fast = fast_start.Handshake.load(config)
        assert self.fast is not None, "handshake.json is stale: python -m hcmcp.fast_start"
        self.server = build_server(config, HealthchecksApi(config.site_root, config.api_key))
        self.session = Session()
        self.read_fd, write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.writer = LineWriter(write_fd)
        self.active = True
        self.answered_fast = 0

    def __del__(self) -> None:
        os.close(self.read_fd)
        os.close(self.writer.fd)

    def full(self, raw: bytes) -> bytes | None:
        """The full path's bytes for one line; None when it is not answered before the event loop."""
        message = _message_or_reply(raw, self.writer)
        if message is not None:
            answered, response = self.server.answer_now(message, self.session)
            if not answered:
                return None
            if response is not None:
                self.writer.write(response)
        try:
            return os.read(self.read_fd, 1 << 20)
        except BlockingIOError:
            return b""

    def feed(self, raw: bytes) -> None:
        fast = self.fast.answer(raw) if self.active else False
        if fast is False and self.active:
            self.active = False
            # What the full path takes over with must be what it would have had.
            assert self.fast.revision == self.session.revision
            assert self.fast.client_capabilities == self.session.client_capabilities
            assert self.fast.initialized == self.session.initialized
        full = self.full(raw)
        if fast is not False:
            self.answered_fast += 1
            assert (fast or b"") == full, (raw, fast, full)


@pytest.mark.parametrize(
    "env", ENVS, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "default"
)
@pytest.mark.parametrize("revision", [*SUPPORTED, "1999-01-01", 7])
def test_handshake_bytes_are_the_full_paths(env, revision):
    both = Both(env)
    for raw in (
        line(jsonrpc="2.0", id="p", method="ping"),
        init(revision, id="first id"),
        INITIALIZED,
        TOOLS_LIST,
        line(jsonrpc="2.0", id=3, method="ping", params={}),
        TOOLS_LIST,
        line(jsonrpc="2.0", id=4, method="tools/call", params={"name": "list_checks"}),
        TOOLS_LIST,
    ):
        both.feed(raw)
    assert both.answered_fast == 6, "the fast path answered less of the handshake than it should"
    assert not both.active


MALFORMED = [
    b"not json",
    b"{",
    b"[]",
    b"[{}]",
    b"1",
    b'"x"',
    b"null",
    b"{}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"} x',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b' \t{"jsonrpc":"2.0","id":1,"method":"ping"} \x0c',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r',
    b'\xff{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1e400}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":Infinity}}',
    b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\\udead"}}',
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}',
    b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
    b'{"id":-9223372036854775809}',
    b'{"jsonrpc":"1.0","id":99999999999999999999,"method":"ping"}',
    b'{"id":1,"method":"ping"}',
    b'{"jsonrpc":2,"id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}',
    b'{"jsonrpc":"2.0","id":1,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":null}',
    b'{"jsonrpc":"2.0","id":1,"method":5}',
    b'{"jsonrpc":"2.0","id":"a\\"b","method":"ping"}',
    b'{"jsonrpc":"2.0","id":"a\\\\b","method":"ping"}',
    b'{"jsonrpc":"2.0","id":"\xc3\xa9\\u2028\\t","method":"ping"}',
    b'{"jsonrpc":"2.0","id":"","method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":null}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":[]}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":"x","protocolVersion":"2025-06-18"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"prompts/list"}',
    b'{"jsonrpc":"2.0","id":1,"method":"nope"}',
    b"",
    b"   ",
    b"\t",
]


@pytest.mark.parametrize("raw", MALFORMED)
def test_unusual_first_lines_get_the_full_paths_answer(raw):
    both = Both({})
    for each in (raw, init("2025-11-25"), INITIALIZED, TOOLS_LIST):
        both.feed(each)


@pytest.mark.parametrize("raw", MALFORMED)
def test_unusual_lines_after_initialize_get_the_full_paths_answer(raw):
    both = Both({})
    for each in (
        init("2025-06-18"),
        raw,
        INITIALIZED,
        TOOLS_LIST,
        init("2025-11-25"),
        line(jsonrpc="2.0", id=5, method="tools/list", params={"cursor": "x"}),
    ):
        both.feed(each)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2]),
        "id": st.integers(-(2**64), 2**64) | st.text(max_size=4) | st.none() | st.booleans(),
        "method": st.sampled_from(
            ["initialize", "ping", "tools/list", "notifications/initialized", "tools/call", "x"]
        ),
        "params": st.fixed_dictionaries(
            {},
            optional={
                "protocolVersion": st.sampled_from([*list(SUPPORTED), "x", 1]),
                "capabilities": _json_values,
                "clientInfo": _json_values,
                "cursor": _json_values,
                "_meta": _json_values,
            },
        )
        | _json_values,
        "result": _json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_messages, min_size=1, max_size=5))
def test_generated_messages_get_the_full_paths_answer(messages):
    both = Both({})
    for message in messages:
        both.feed(json.dumps(message).encode())


def test_a_stale_file_steps_aside(monkeypatch):
    monkeypatch.setattr(handshake.sources, "checksum", lambda names: "00000000")
    assert fast_start.Handshake.load(load({})) is None


def test_a_selection_the_full_path_refuses_is_refused_alike():
    with pytest.raises(ConfigError) as fast:
        fast_start.Handshake.load(load({"HEALTHCHECKS_ALLOW_TOOLS": "nothing_like_it"}))
    assert "nothing_like_it" in str(fast.value)


def test_handshake_file_is_fresh():
    """Fails when a source it depends on changed: run python -m hcmcp.fast_start and commit the file."""
    done = run_check("hcmcp.fast_start")
    assert done.returncode == 0, done.stderr


def test_the_files_listed_are_the_modules_the_generator_loaded():
    """Every module the tools come from is listed (no hand-kept list to miss one), and so are the
    full path's server and this generator; the HTTP list holds the full HTTP path's modules."""
    with open(fast_start.DATA_FILE, "rb") as file:
        stored = json.load(file)
    listed = set(stored["source_files"])
    server = build_server(load({}), HealthchecksApi("https://healthchecks.io", None))
    package = os.path.dirname(os.path.dirname(os.path.abspath(fast_start.__file__)))
    for tool in server.tools.values():
        for part in (tool.handler, tool.params, tool.result):
            path = os.path.relpath(sys.modules[part.__module__].__file__, package)
            assert path in listed, f"{path} (from {tool.name}) is not in source_files"
    assert {"protocol/server.py", "tools/assemble.py", "fast_start/generate.py"} <= listed
    assert {"protocol/streamable_http/serving.py", "http/server/request_head.py"} <= set(
        stored["http_source_files"]
    )
    assert not listed & set(stored["http_source_files"])


@pytest.mark.parametrize(
    "edited", ["tools/read_project.py", "protocol/server.py", "config/settings.py"]
)
def test_an_edited_source_makes_the_file_stale_and_the_fast_path_step_aside(tmp_path, edited):
    """In a copy of the package, one changed byte in a listed source: the guard fails, and the
    copy's own fast path finds its handshake.json stale (slow, never wrong)."""
    copy = copy_package(tmp_path)
    assert run_check("hcmcp.fast_start", tmp_path).returncode == 0
    with open(copy / edited, "a") as file:
        file.write("\n# edited\n")
    done = run_check("hcmcp.fast_start", tmp_path)
    assert done.returncode == 1 and "stale" in done.stderr, done
    probe = python_in(
        tmp_path,
        "import hcmcp, hcmcp.fast_start.handshake as h, hcmcp.config.settings as c\n"
        f"assert hcmcp.__file__.startswith({str(tmp_path)!r}), hcmcp.__file__\n"
        "print(h.Handshake.load(c.load({})))",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None"


def test_a_listed_source_that_is_gone_makes_the_file_stale(tmp_path):
    copy = copy_package(tmp_path)
    (copy / "fast_start" / "generate.py").unlink()
    probe = python_in(
        tmp_path,
        "import hcmcp.fast_start.handshake as h, hcmcp.config.settings as c\n"
        "print(h.Handshake.load(c.load({})))",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None"


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
    }
    return subprocess.Popen(
        [sys.executable, "-m", "hcmcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**full_env, **env},
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "first", [b"not json", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None]
)
def test_over_stdio_the_process_answers_as_the_full_path(first):
    env = {
        "HEALTHCHECKS_API_KEY": "k" * 32,
        "HEALTHCHECKS_READ_ONLY": "true",
        "HEALTHCHECKS_URL": "http://127.0.0.1:9",
    }
    lines = ([first] if first else []) + [
        init("2025-06-18", id="x"),
        INITIALIZED,
        TOOLS_LIST,
        line(jsonrpc="2.0", id=9, method="ping"),
    ]
    both = Both(env)
    expected = b"".join(both.full(raw) or b"" for raw in lines)
    proc = _spawn([], env)
    try:
        out, err = proc.communicate(b"\n".join(lines) + b"\n", timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out == expected


def test_over_stdio_the_demo_hands_over_to_the_full_server_for_a_call():
    proc = _spawn(["--demo"], {})
    try:
        proc.stdin.write(init("2025-11-25") + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"]["serverInfo"]["name"] == "hcmcp"
        proc.stdin.write(
            INITIALIZED
            + b"\n"
            + TOOLS_LIST
            + b"\n"
            + line(
                jsonrpc="2.0",
                id=3,
                method="tools/call",
                params={"name": "list_checks", "arguments": {}},
            )
            + b"\n"
            + line(jsonrpc="2.0", id=4, method="ping")
            + b"\n"
        )
        proc.stdin.flush()
        listed = json.loads(proc.stdout.readline())
        assert "list_checks" in [tool["name"] for tool in listed["result"]["tools"]]
        replies = {
            reply["id"]: reply for reply in (json.loads(proc.stdout.readline()) for _ in range(2))
        }
        assert not replies[3]["result"].get("isError"), replies
        assert replies[3]["result"]["structuredContent"]["checks"], replies
        assert replies[4] == {"jsonrpc": "2.0", "id": 4, "result": {}}
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()


def test_the_fast_path_imports_nothing_heavy_before_the_first_reply():
    """The point of the module: no msgspec, orjson, anyio, typing, re or dataclasses before initialize."""
    probe = (
        "import sys, os, runpy\n"
        "real = os.write\n"
        "def write(fd, data):\n"
        "    heavy = sorted(m for m in ('msgspec', 'orjson', 'anyio', 'typing', 're', 'dataclasses', 'asyncio',"
        " 'ssl', 'hcmcp.http.client.tls', 'urllib.parse')"
        " if m in sys.modules)\n"
        "    real(2, ('HEAVY:' + ','.join(heavy) + '\\n').encode()); os.write = real\n"
        "    return real(fd, data)\n"
        "os.write = write\n"
        "sys.argv = ['hcmcp']\n"
        "runpy.run_module('hcmcp', run_name='__main__')\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
    }
    env["HEALTHCHECKS_URL"] = (
        "https://127.0.0.1:9"  # https: not even the TLS settings load before the reply
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        input=init("2025-11-25") + b"\n",
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert b'"protocolVersion":"2025-11-25"' in proc.stdout, proc.stderr
    heavy = [line for line in proc.stderr.decode().splitlines() if line.startswith("HEAVY:")]
    # runpy itself brings none of these; an editable install's finder brings re/urllib.parse, so
    # only the packages this project chose to defer are checked strictly.
    imported = heavy[0][len("HEAVY:") :].split(",") if heavy and heavy[0] != "HEAVY:" else []
    assert not {
        "msgspec",
        "orjson",
        "anyio",
        "asyncio",
        "dataclasses",
        "ssl",
        "hcmcp.http.client.tls",
    } & set(imported), heavy


_url_text = st.lists(
    st.sampled_from(
        [*list("hHtTpPsS:/?#.-+@0123456789aAzZkK_ ~%"), "/api/v", "://", "é", "\n", "K"]  # noqa: RUF001  (the Kelvin sign on purpose: not a K)
    ),
    max_size=14,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_url_text)
def test_the_url_split_without_re_agrees_with_the_regex(url):
    """config/settings.py splits printable-ASCII URLs by hand (importing re costs start-up time); it must
    agree with the regex it replaced on every input."""
    import re

    from hcmcp.config import settings as config

    match = re.fullmatch(r"(?i)([a-z][a-z0-9+.-]*)://([^/?#]*)([^?#]*)", url)
    assert config._split_url(url) == (match.groups() if match else None)
    path = url.rstrip("/")
    assert config._strip_api_suffix(path) == re.sub(r"/api/v\d+/?$", "", path)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["127", ".", "0", "1", "25", "1000", "a", "", "\u0663", "localhost"]),
        max_size=9,
    ).map("".join)
)
def test_the_loopback_check_without_re_agrees_with_the_regex(host):
    import re

    from hcmcp.config.network import _loopback_v4

    assert _loopback_v4(host) == bool(re.fullmatch(r"127(?:\.\d{1,3}){3}", host))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "http",
                "https",
                "://",
                "h",
                "H",
                ".",
                ":",
                "8000",
                "99999",
                "x",
                "@",
                "/",
                "[",
                "]",
                "::1",
                "é",
                "?",
                "-",
            ]
        ),
        max_size=8,
    ).map("".join)
)
def test_the_url_parts_without_urllib_agree_with_urlsplit(url):
    from urllib.parse import urlsplit

    from hcmcp.config.network import _split

    def parts(split):
        try:
            port = ("port", split.port)
        except ValueError as error:
            port = ("error", str(error))
        return split.scheme, split.hostname, port

    try:
        expected = parts(urlsplit(url))
    except ValueError:
        with pytest.raises(ValueError):
            parts(_split(url))
        return
    assert parts(_split(url)) == expected
