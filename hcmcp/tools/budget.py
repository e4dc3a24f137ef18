"""The result budget: the bytes one tools/call result may take as a client receives it.

It covers the whole serialized result: every content block and structuredContent, with
ENVELOPE_ROOM kept free for what the protocol adds around them (isError, 2026's resultType and
_meta). The text block repeats structuredContent's JSON (after the marker sentence) and is itself
a JSON string, so each value is paid for twice, the second time with its escapes escaped:
``twice`` is that cost, ``whole_size`` the exact total. HCMCP_RESULT_BUDGET sets the budget
(config/settings.py); build_server hands it to ``configure``; the default, 64 KiB, is about 16k tokens
at the usual ~4 bytes of JSON a token.
"""

from __future__ import annotations

import orjson

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject


DEFAULT_BYTES = 64 * 1024
ENVELOPE_ROOM = 1024  # isError, resultType, _meta.serverInfo: what the protocol adds
NOTE_ROOM = 1024  # a sentence the note gains after fitting, in both copies
BYTES_PER_TOKEN = 4  # a rough mean for JSON; only ever used to say the size in tokens

_in_force = [DEFAULT_BYTES]


def configure(budget: int) -> None:
    """The budget for this process (HCMCP_RESULT_BUDGET, parsed by config/settings.py)."""
    _in_force[0] = budget


def budget_bytes() -> int:
    return _in_force[0]


def described(budget: int | None = None) -> str:
    """ "64 KiB" (or "50000 bytes"), for the texts that name the budget."""
    size = budget_bytes() if budget is None else budget
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} bytes"


def encoded(value: object) -> int:
    return len(orjson.dumps(value))


def in_text(json_bytes: bytes) -> int:
    """What JSON (as orjson or msgspec write it) costs again inside the text block, as part of a
    JSON string: each quote and backslash escaped once more. Exact, because their JSON holds no
    raw control character (they are escaped already) and non-ASCII stays as it is."""
    return len(json_bytes) + json_bytes.count(b'"') + json_bytes.count(b"\\")


def twice(value: object) -> int:
    """A value's cost in the whole result: in structuredContent and again in the text block."""
    data = orjson.dumps(value)
    return len(data) + in_text(data)


# {"content":[{"type":"text","text":""}],"structuredContent":0} without the "" and the 0
_SHELL = len(orjson.dumps({"content": [{"type": "text", "text": ""}], "structuredContent": 0})) - 3


def whole_size(structured: JsonObject, text: str) -> int:
    """The serialized result with one text block, plus the protocol's room."""
    return sized(orjson.dumps(structured), len(orjson.dumps(text)))


def sized(structured_json: bytes, text_json: int) -> int:
    """The same from structuredContent's JSON and the length of the text block's JSON string
    (quotes included), for a caller that has them already."""
    return _SHELL + len(structured_json) + text_json + ENVELOPE_ROOM
