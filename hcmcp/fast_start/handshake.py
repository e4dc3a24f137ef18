"""The precomputed handshake: ``handshake.json`` loaded, checked, and asked for one line's answer.

``handshake.json`` (generated, beside this file, by ``python -m hcmcp.fast_start``) holds the exact
bytes that the full ``McpServer.handle`` produces for ``initialize`` per legacy revision, ``ping``,
and every tool's ``tools/list`` entry per revision shape, with the files of the modules the
generator had loaded and a checksum of them (hcmcp/sources.py). A checksum that does not match
means the file is stale: ``Handshake.load`` then answers None and the full path serves everything
(stale costs start-up time, never correctness).

Each line is parsed with the stdlib's C JSON scanner (``_json``); only a plain, well-formed
2025-era request it knows (initialize, notifications/initialized, tools/list without a cursor,
ping) is answered; anything else is handed over, so every error answer is the full path's own.
"""

from __future__ import annotations

import os

from .. import sources

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypedDict

    from ..config.settings import Config
    from ..json_types import JsonObject, JsonValue

    Scanner = Callable[[str, int], tuple[JsonValue, int]]

    class ToolEntry(TypedDict):
        """One tool in handshake.json (generate.py writes it)."""

        name: str
        tags: list[str]
        writes: bool
        descriptors: dict[str, str]  # tool shape -> the Tool object's JSON text

    class HandshakeData(TypedDict):
        """handshake.json (generate.py writes it; is_fresh tells whether it is current)."""

        source: str
        http_source: str
        latest: str
        initialize: dict[str, str]  # revision -> the InitializeResult's JSON text
        ping: str
        tool_shapes: dict[str, str]  # revision -> the shape of its Tool objects
        tools: list[ToolEntry]
        source_files: list[str]
        http_source_files: list[str]


DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "handshake.json")
DATA_NAME = "fast_start/handshake.json"  # DATA_FILE relative to the package root (sources.py)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
_INT64 = 2**63


class _Unusual(Exception):
    """Raised by the parser's hooks: a value the full path's decoder treats differently."""


def _no_constant(name: str) -> float:
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
    memo: dict[str, str] = {}  # noqa: RUF012 -- the scanner's own cache, shared on purpose


def scanner() -> Scanner:
    import _json

    # _json's stub names json.JSONDecoder as the context; any object with its attributes will do.
    scan: Scanner = _json.make_scanner(_ScannerContext())  # type: ignore[arg-type]
    return scan


_WHITESPACE = " \t\n\r"


def parse(scan: Scanner, line: bytes, surrogates_allowed: bool = False) -> JsonValue:
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


def is_fresh(data: Mapping[str, object], field: str) -> bool:
    """The checksum in ``data[field]`` matches the files listed in ``data[field + "_files"]``."""
    names = data.get(field + "_files")
    if type(names) is not list or not all(type(name) is str for name in names):
        return False
    try:
        return data.get(field) == sources.checksum(names)
    except OSError:  # a file the generator loaded is gone: stale
        return False


def _encode_id(value: object) -> bytes | None:
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


class _Entry:
    """One tool as handshake.json holds it: what selection.select looks at, and its descriptors."""

    __slots__ = ("name", "raw", "tags")

    def __init__(self, raw: ToolEntry) -> None:
        self.name: str = raw["name"]
        self.tags: frozenset[str] = frozenset(raw["tags"])
        self.raw = raw


class Handshake:
    """The precomputed answers for one configuration (its tool selection)."""

    def __init__(self, data: HandshakeData, config: Config, scan: Scanner) -> None:
        from ..tools.selection import select

        self.scan = scan
        # select() takes anything with name and tags (selection.Selectable).
        read = [_Entry(raw) for raw in data["tools"] if not raw["writes"]]
        write = [_Entry(raw) for raw in data["tools"] if raw["writes"]]
        chosen = select(read, write, config)  # raises ConfigError as the full path
        self.data = data
        self.latest: str = data["latest"]
        self.initialize = {rev: text.encode() for rev, text in data["initialize"].items()}
        self.ping: bytes = data["ping"].encode()
        self.tools_list: dict[str, bytes] = {}
        for revision, shape in data["tool_shapes"].items():
            entries = b",".join(entry.raw["descriptors"][shape].encode() for entry in chosen)
            self.tools_list[revision] = b'{"tools":[' + entries + b"]}"
        # What the session learnt, handed to the full path when it takes over.
        self.revision: str | None = None
        self.client_capabilities: JsonObject = {}
        self.client_info: JsonObject = {}
        self.initialized = False

    @classmethod
    def load(cls, config: Config) -> Handshake | None:
        """None when handshake.json is missing, unreadable or stale; raises ConfigError for a
        tool selection the full path would refuse."""
        try:
            scan = scanner()
            data = parse(scan, sources.read_source(DATA_NAME), surrogates_allowed=True)
            if type(data) is not dict or not is_fresh(data, "source"):
                return None
        except Exception:  # noqa: BLE001 -- whatever is wrong with the file, the full path serves
            return None
        # generate.py wrote it, and is_fresh vouches that it is what generate.py writes now
        return cls(data, config, scan)  # type: ignore[arg-type]

    def http_fresh(self) -> bool:
        """The full path's HTTP sources are those the file was generated from (see http.py)."""
        return is_fresh(self.data, "http_source")

    def answer(self, line: bytes) -> bytes | bool | None:
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
        result: bytes
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
