"""The stdio handshake answered before the heavy imports.

Importing msgspec, orjson, the tools and anyio costs several times a bare interpreter's start,
and a client waits for ``initialize`` and ``tools/list`` before it can do anything. So a plain
stdio server (``hcmcp``, ``hcmcp --demo``) first runs this module, which imports only the
standard library's C pieces (``_json``, ``zlib``) and our config:

- ``handshake.json`` (generated, beside this file) holds the exact bytes that the full
  ``McpServer.handle`` produces for ``initialize`` per legacy revision, ``ping``, and every
  tool's ``tools/list`` entry per revision shape, with a checksum of the source files they come
  from. A checksum that does not match means the file is stale: this module then steps aside
  and the full path serves everything (stale costs start-up time, never correctness).
  Regenerate it with ``python -m hcmcp.fast_start``; tests/test_fast_start.py fails when stale.
- Each line is parsed with the stdlib's C JSON scanner. Only a plain, well-formed 2025-era
  request it knows (initialize, notifications/initialized, tools/list without a cursor, ping)
  is answered here; anything else -- a malformed line, an error case, a 2026-era ``_meta``
  request, a tools/call -- is put back in front of the input and the full path takes over from
  that line, with the session state (revision, client capabilities, initialized) handed on.
  So every answer, including every error, is the full path's own.
- Once ``initialize`` is answered, a background thread imports and builds the real server
  (and, for --demo, the simulator) while the client reads the reply and sends tools/list, so
  the first tools/call finds everything loaded.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_FILE = os.path.join(HERE, "handshake.json")
# The files whose code decides the handshake's bytes (and the tool selection); the checksum
# covers them all. Paths relative to this package.
SOURCES = (
    "__init__.py",
    "__main__.py",
    "config.py",
    "config_parse.py",
    "tools/selection.py",
    "tools/catalog.py",
    "tools/read.py",
    "tools/read_project.py",
    "tools/write.py",
    "tools/confirm.py",
    "tools/shaping.py",
    "tools/present.py",
    "healthchecks/models.py",
    "healthchecks/api.py",
    "healthchecks/judging.py",
    "healthchecks/errors.py",
    "healthchecks/versions.py",
    "protocol/tool.py",
    "protocol/server.py",
    "protocol/revisions.py",
    "protocol/jsonrpc.py",
    "protocol/stdio.py",
    "protocol/seal.py",
    "protocol/asking.py",
    "protocol/features.py",
    "protocol/prompts.py",
    "protocol/resources.py",
    "protocol/logs.py",
    "protocol/completion.py",
    "protocol/tasks.py",
    "protocol/content.py",
    "protocol/subscriptions.py",
    "protocol/progress.py",
    "protocol/client_requests.py",
)
# The full path's files that decide the HTTP answers fast_http.py writes (status line, headers,
# the guard's verdicts): their own checksum, so that an HTTP change never slows the stdio start.
HTTP_SOURCES = (
    "protocol/streamable_http.py",
    "protocol/http_serving.py",
    "protocol/http_guard.py",
    "protocol/http_sessions.py",
    "protocol/http_media.py",
    "http/server.py",
    "http/connection.py",
    "http/framing.py",
    "http/messages.py",
    "http/request_head.py",
    "http/request_reader.py",
    "http/response_head.py",
    "http/socket_stream.py",
)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
_HAND_OVER_BYTES = (
    1 << 20
)  # a line longer than this is the full path's business (its ceiling, its error)
_INT64 = 2**63


class _Unusual(Exception):
    """Raised by the parser's hooks: a value the full path's decoder treats differently."""


def _no_constant(name: str):
    raise _Unusual(name)  # NaN, Infinity: msgspec refuses them


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Unusual(text)  # 1e400: msgspec refuses it
    return value


class _ScannerContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(_finite_float)
    parse_int = int
    parse_constant = staticmethod(_no_constant)
    memo: dict = {}


def _scanner():
    import _json

    return _json.make_scanner(_ScannerContext())


_WHITESPACE = " \t\n\r"


def parse(scan, line: bytes, surrogates_allowed: bool = False):
    """One JSON value from a whole line, or raises (anything: the caller hands the line over)."""
    if not surrogates_allowed and (b"\\ud" in line or b"\\uD" in line):
        raise _Unusual("surrogate escape")  # msgspec refuses lone surrogates; pairs are rare here
    text = line.decode("utf-8")
    start = 0
    while start < len(text) and text[start] in _WHITESPACE:
        start += 1
    value, end = scan(text, start)
    if text[end:].strip(_WHITESPACE):
        raise _Unusual("extra data")
    return value


def _read_source(name: str) -> bytes:
    loader = globals().get("__loader__")
    path = os.path.join(HERE, name)
    if loader is not None and hasattr(loader, "get_data"):  # a file, or a member of a .pyz
        return loader.get_data(path)
    with open(path, "rb") as file:
        return file.read()


def source_checksum(names: tuple[str, ...] = SOURCES) -> str:
    import zlib

    checksum = 0
    for name in names:
        checksum = zlib.crc32(_read_source(name), checksum)
    return f"{checksum:08x}"


def _encode_id(value) -> bytes | None:
    """The id as orjson writes it, or None when this module should not try."""
    if type(value) is int:
        return str(value).encode() if -_INT64 <= value < _INT64 else None
    if (
        type(value) is str
        and value.isascii()
        and value.isprintable()
        and '"' not in value
        and "\\" not in value
    ):
        return b'"' + value.encode() + b'"'
    return None


class Handshake:
    """The precomputed answers for one configuration (its tool selection)."""

    def __init__(self, data: dict, config, scan) -> None:
        from .tools.selection import select

        self.scan = scan

        class Entry:
            def __init__(self, raw: dict) -> None:
                self.name, self.tags, self.raw = raw["name"], frozenset(raw["tags"]), raw

        read = [Entry(raw) for raw in data["tools"] if not raw["writes"]]
        write = [Entry(raw) for raw in data["tools"] if raw["writes"]]
        chosen = select(read, write, config)  # raises ConfigError exactly as the full path would
        self.latest = data["latest"]
        self.initialize = {rev: text.encode() for rev, text in data["initialize"].items()}
        self.ping = data["ping"].encode()
        self.http_source = data.get("http_source")  # fast_http.py compares it with HTTP_SOURCES
        self.tools_list = {}
        for revision, shape in data["tool_shapes"].items():
            entries = b",".join(entry.raw["descriptors"][shape].encode() for entry in chosen)
            self.tools_list[revision] = b'{"tools":[' + entries + b"]}"
        # What the session learnt, handed to the full path when it takes over.
        self.revision: str | None = None
        self.client_capabilities: dict = {}
        self.client_info: dict = {}
        self.initialized = False

    @classmethod
    def load(cls, config) -> Handshake | None:
        """None when handshake.json is missing, unreadable or stale; raises ConfigError for a
        tool selection the full path would refuse."""
        try:
            scan = _scanner()
            data = parse(scan, _read_source("handshake.json"), surrogates_allowed=True)
            if data.get("source") != source_checksum():
                return None
        except Exception:  # noqa: BLE001 -- whatever is wrong with the file, the full path serves
            return None
        return cls(data, config, scan)

    def answer(self, line: bytes) -> bytes | None | bool:
        """The reply line to write; None for a line that needs no reply; False: hand over."""
        if not line.strip():
            return None  # the full path skips blank lines too
        try:
            message = parse(self.scan, line)
        except Exception:  # noqa: BLE001 -- malformed or unusual: the full path answers it
            return False
        if (
            type(message) is not dict
            or message.get("jsonrpc") != "2.0"
            or "result" in message
            or "error" in message
        ):
            return False
        method = message.get("method")
        params = message.get("params")
        if type(method) is not str:
            return False
        if params is None:
            params = {}
        elif type(params) is not dict:
            return False
        meta = params.get("_meta")
        if isinstance(meta, dict) and META_VERSION in meta:
            return False  # a 2026-era request
        if "id" not in message:
            if method == "notifications/initialized":
                self.initialized = True
                return None
            return False
        ident = _encode_id(message["id"])
        if ident is None:
            return False
        if method == "initialize":
            capabilities = params.get("capabilities", {})
            if self.revision is not None or type(capabilities) is not dict:
                return False
            requested = params.get("protocolVersion")
            self.revision = (
                requested
                if type(requested) is str and requested in self.initialize
                else self.latest
            )
            self.client_capabilities = capabilities
            info = params.get("clientInfo")
            self.client_info = info if isinstance(info, dict) else {}
            result = self.initialize[self.revision]
        elif method == "tools/list":
            if self.revision is None or params.get("cursor") is not None:
                return False
            result = self.tools_list[self.revision]
        elif method == "ping":
            result = self.ping
        else:
            return False
        return b'{"jsonrpc":"2.0","id":' + ident + b',"result":' + result + b"}\n"


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def exit_now(code: int = 0) -> None:
    """As protocol.stdio.exit_now, without importing it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


class Warmer:
    """Runs ``build`` in a background thread; ``result()`` waits for it (or runs it here)."""

    def __init__(self, build) -> None:
        self._build = build
        self._thread = None
        self._value = None
        self._error: BaseException | None = None

    def start(self) -> None:
        import threading

        # Hand the interpreter back to the main thread quickly while we import: it has replies to write.
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        self._thread = threading.Thread(target=self._run, name="hcmcp-warm-up", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._build()
        except BaseException as error:  # noqa: BLE001 -- re-raised on the main thread
            self._error = error

    def result(self):
        if self._thread is None:
            return self._build()
        self._thread.join()
        sys.setswitchinterval(self._interval)
        if self._error is not None:
            raise self._error
        return self._value


def _wakeup_pipe() -> tuple[int, int] | None:
    """(read, write) ends of a pipe that signal.set_wakeup_fd writes to; None off the main thread."""
    import _signal  # not signal: that imports enum (milliseconds of start-up)

    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_read, False)
    os.set_blocking(wakeup_write, False)
    try:
        _signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread (an in-process test): no handler could run here anyway
        os.close(wakeup_read)
        os.close(wakeup_write)
        return None
    return wakeup_read, wakeup_write


def _close_wakeup_pipe(pipe: tuple[int, int] | None) -> None:
    if pipe is not None:
        import _signal

        _signal.set_wakeup_fd(-1)  # the full path sets its own (run_stdio, or the event loop)
        os.close(pipe[0])
        os.close(pipe[1])


def _wait_for_input(fd: int, wakeup_fd: int) -> None:
    """Block until ``fd`` is readable, waking for a signal too (as protocol.stdio's LineReader).

    A Python signal handler runs between bytecodes, not inside a system call that began after the
    signal arrived: a SIGTERM landing just before ``os.read()`` started left the process blocked in
    that read until the client wrote again. The signal's C handler writes to the wakeup pipe, so
    poll() returns and the SIGTERM handler (exit 0) runs on the next bytecode.
    """
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    poller.register(wakeup_fd, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if wakeup_fd in ready:
            try:
                os.read(wakeup_fd, 512)
            except BlockingIOError:
                pass
        if fd in ready:
            return


def serve(
    handshake: Handshake, build, continue_with, stdin_fd: int = 0, stdout_fd: int = 1
) -> None:
    """Answer the handshake from ``handshake`` until a line it does not know; then call
    ``continue_with(built, reader, session)`` with what ``build()`` returned, a stdio LineReader
    holding everything not yet answered (that line first) and the Session so far. Never returns
    at stdin EOF before that: the process exits 0, as the full path does."""
    buffer = bytearray()
    eof = False
    warmer = Warmer(build)
    wakeup = _wakeup_pipe()
    while True:
        end = buffer.find(b"\n")
        if end < 0:
            if eof or len(buffer) > _HAND_OVER_BYTES:
                if not buffer:
                    exit_now(0)
                break  # a last line without newline, or a very long one
            if wakeup is not None:
                _wait_for_input(stdin_fd, wakeup[0])
            data = os.read(stdin_fd, 1 << 16)
            if data:
                buffer += data
            else:
                eof = True
            continue
        line = bytes(buffer[:end]).rstrip(b"\r")
        reply = handshake.answer(line)
        if reply is False:
            break
        del buffer[: end + 1]
        if reply is not None:
            write_all(stdout_fd, reply)
            if warmer._thread is None and handshake.revision is not None:
                warmer.start()
    _close_wakeup_pipe(wakeup)
    built = warmer.result()
    from .protocol.server import Session
    from .protocol.stdio import LineReader

    reader = LineReader(stdin_fd)
    reader.buffer = buffer
    reader.eof = eof
    session = Session(
        revision=handshake.revision,
        client_capabilities=handshake.client_capabilities,
        client_info=handshake.client_info,
        initialized=handshake.initialized,
    )
    continue_with(built, reader, session)


def generate() -> dict:
    """What DATA_FILE must hold for this source: the full path's own bytes, asked of McpServer.handle."""
    import orjson

    from .__main__ import build_server
    from .config import load
    from .healthchecks.api import HealthchecksApi
    from .protocol.jsonrpc import Message
    from .protocol.revisions import LATEST_LEGACY, LEGACY_REVISIONS, shape_tool
    from .protocol.server import Session
    from .tools.catalog import all_tools

    api = HealthchecksApi("https://healthchecks.io", None)
    server = build_server(load({}), api)
    tools = list(server.tools.values())
    read_names = {tool.name for tool in all_tools(api)[0]}
    initialize = {}
    for revision in LEGACY_REVISIONS:
        session = Session()
        message = Message(
            jsonrpc="2.0",
            id=1,
            method="initialize",
            params={"protocolVersion": revision, "capabilities": {}},
        )
        answered, response = server.answer_now(message, session)
        assert answered and "result" in response, response
        initialize[revision] = orjson.dumps(response["result"]).decode()
    answered, response = server.answer_now(Message(jsonrpc="2.0", id=1, method="ping"), Session())
    shapes: dict[str, str] = {}
    tool_shapes = {}
    for revision in LEGACY_REVISIONS:
        texts = tuple(
            orjson.dumps(shape_tool(tool.descriptor(), revision)).decode() for tool in tools
        )
        shape = next((name for name, known in shapes.items() if known == texts), revision)
        shapes[shape] = texts
        tool_shapes[revision] = shape
    entries = []
    for index, tool in enumerate(tools):
        entries.append(
            {
                "name": tool.name,
                "tags": sorted(tool.tags),
                "writes": tool.name not in read_names,
                "descriptors": {shape: texts[index] for shape, texts in shapes.items()},
            }
        )
    return {
        "source": source_checksum(),
        "http_source": source_checksum(HTTP_SOURCES),
        "latest": LATEST_LEGACY,
        "initialize": initialize,
        "ping": orjson.dumps(response["result"]).decode(),
        "tool_shapes": tool_shapes,
        "tools": entries,
    }


if __name__ == "__main__":
    import orjson

    with open(DATA_FILE, "wb") as out:
        out.write(orjson.dumps(generate(), option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {DATA_FILE}")
