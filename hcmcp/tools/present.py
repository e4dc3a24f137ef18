"""What a tool result looks like on the wire: the untrusted marker and the result budget.

Every tool of this package answers through ``present`` (``get_ping_body`` through
``present_body``), the ``presenter`` of its Tool:

- **The budget.** The whole result as a client receives it (the text block and
  structuredContent, see budget.py) stays within the budget, whatever the instance sent and
  whatever the caller passed (a 120,000-character ``desc`` comes back from create_check too).
  Each string is paid for in both copies, so a cut saves twice what it removes. Listings
  already drop whole entries to fit and offer the next page (shaping.fit_entries);
  what is still too large is one object with long texts, and those are shortened: the
  longest first, all of them to the same length if several must give (so a short field is
  never cut while a longer one keeps more), each cut marked in place with how many
  characters were left out. A string keeps at least MIN_KEPT characters, so identifiers
  (UUIDs, unique_keys, tokens) are never cut. The result keeps its shape, so it still
  satisfies the tool's outputSchema.
- **The marker.** A result that reports what the instance said (``untrusted: true``; for
  delete_check, only when it holds deleted checks or failures) opens
  its text block with MARKER, one sentence saying that what follows is untrusted data from
  Healthchecks and never instructions; ``untrusted`` and ``source`` are set here, last, so
  nothing the instance sends can change them. There is no closing marker to forge:
  everything after the sentence is the instance's. (An error that quotes the instance puts
  MARKER right before the quote, at the end of its text: shaping.tool_error.)
  ``get_ping_body``'s text block is the cleaned body itself after the sentence, so a
  person reads the job's output rather than an escaped JSON string.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

import msgspec
import orjson

from ..protocol.tool import AnyTool, ToolError
from . import budget
from .shaping import MARKER, SOURCE

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

MIN_KEPT = 64  # characters every shortened string keeps
_PROTECTED = frozenset({"untrusted", "source"})

# The whole result's size for a structuredContent, and what one string of it costs there
# (where: its path, e.g. "check.desc"): the two things the text block's shape decides.
Size = Callable[["JsonObject"], int]
Cost = Callable[[str, str], int]


def cut_mark(left_out: int) -> str:
    return f"… [{left_out} more characters cut here to keep the result under {budget.described()}]"


def _cut(text: str, keep: int) -> str:
    return text[:keep] + cut_mark(len(text) - keep)


def _worth_cutting(text: str, keep: int) -> bool:
    """Cut only where it saves something: a string just over ``keep`` would grow by its mark."""
    return len(text) - keep > len(cut_mark(len(text) - keep))


def _encoded(value: JsonValue) -> int:
    return len(orjson.dumps(value))


def _json_text(structured: JsonObject) -> str:
    """The text block of a JSON result: the JSON, after MARKER when it is untrusted."""
    text = orjson.dumps(structured).decode()
    return f"{MARKER}\n\n{text}" if structured.get("untrusted") is True else text


def _json_size(structured: JsonObject) -> int:
    return budget.whole_size(structured, _json_text(structured))


def _twice(where: str, text: str) -> int:
    return budget.twice(text)


# Where a long string sits: its container (an object or an array of the result), its key there
# (a name or an index, indexing the container as a mapping of either), and its path for texts.
Spot = tuple["dict[str | int, JsonValue]", "str | int", str]


def _long_strings(node: JsonValue, path: str, into: list[Spot]) -> None:
    """Every string longer than MIN_KEPT under ``node``: (its container, key or index, path)."""
    if isinstance(node, dict):
        items: Iterable[tuple[str | int, JsonValue]] = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)
        if isinstance(value, str):
            if len(value) > MIN_KEPT and key not in _PROTECTED:
                into.append((cast("dict[str | int, JsonValue]", node), key, where))
        else:
            _long_strings(value, where, into)


def fit_result(
    structured: JsonObject,
    limit: int | None = None,
    *,
    size_of: Size = _json_size,
    cost: Cost = _twice,
) -> list[str]:
    """Shorten the longest strings of ``structured`` (in place) until the whole result fits
    ``limit`` (default: the budget in force), its size measured by ``size_of`` (default: a JSON
    text block, as ``present`` writes it) and each string's share by ``cost``.

    Returns the paths of the strings that were cut ([] when it fitted as it was). Raises
    ToolError when even every long string at MIN_KEPT characters would not fit: then the
    result is large by its number of entries, which a narrower request fixes.
    """
    limit = budget.budget_bytes() if limit is None else limit
    size = size_of(structured)
    if size <= limit:
        return []
    leaves: list[Spot] = []
    _long_strings(structured, "", leaves)
    originals = [
        (container, key, where, text, cost(where, text))
        for container, key, where in leaves
        for text in (cast(str, container[key]),)
    ]
    target = limit - budget.NOTE_ROOM

    def size_at(keep: int) -> int:
        total = size
        for _, _, where, text, paid in originals:
            if _worth_cutting(text, keep):
                total += cost(where, _cut(text, keep)) - paid
        return total

    if not originals or size_at(MIN_KEPT) > target:
        raise ToolError(
            f"The result of this call would be {size} bytes, more than this server's "
            f"{budget.described(limit)} result budget even with every text shortened. Narrow the "
            "request (a lower limit, a filter) and call again, or raise HCMCP_RESULT_BUDGET.",
            kind="result_too_large",
        )
    low, high = MIN_KEPT, max(len(text) for _, _, _, text, _ in originals)
    while low < high:  # the largest length every long string may keep
        middle = (low + high + 1) // 2
        if size_at(middle) <= target:
            low = middle
        else:
            high = middle - 1
    cut: list[str] = []
    for container, key, where, text, _ in originals:
        if _worth_cutting(text, low):
            container[key] = _cut(text, low)
            cut.append(where)
    if "note" in structured and (structured["note"] is None or isinstance(structured["note"], str)):
        shown = ", ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        sentence = (
            f"{shown} {'was' if len(cut) == 1 else 'were'} shortened to keep the result "
            f"under {budget.described(limit)}; each cut is marked in place with how many "
            "characters were left out."
        )
        structured["note"] = f"{structured['note']} {sentence}" if structured["note"] else sentence
    return cut


def _is_untrusted(value: msgspec.Struct) -> bool:
    return getattr(value, "untrusted", None) is True


_MARKED = f"{MARKER}\n\n"
_MARKED_IN_TEXT = len(orjson.dumps(_MARKED)) - 2


def _fitted(
    value: msgspec.Struct,
    text_of: Callable[[JsonObject], str] = _json_text,
    cost: Cost = _twice,
) -> tuple[JsonObject, str]:
    """structuredContent and the text block, shortened together until the whole result fits
    the budget (measured once when it fits, as it nearly always does)."""
    structured = msgspec.to_builtins(value)
    if _is_untrusted(value):
        # Ours, set here: no field the instance sent can stand in for these two.
        structured["untrusted"] = True
        structured["source"] = SOURCE
    if text_of is _json_text:  # the usual case: one encode, the size counted from it
        encoded = orjson.dumps(structured)
        marked = structured.get("untrusted") is True
        prefix = 2 + (_MARKED_IN_TEXT if marked else 0)  # the text string's quotes, MARKER
        # In the text block the JSON takes at most twice its length (every byte a quote):
        # counting the quotes and backslashes is worth it only near the budget.
        fits = budget.sized(encoded, prefix + 2 * len(encoded)) <= budget.budget_bytes()
        if fits or budget.sized(encoded, prefix + budget.in_text(encoded)) <= budget.budget_bytes():
            return structured, (_MARKED + encoded.decode() if marked else encoded.decode())
    text = text_of(structured)
    if budget.whole_size(structured, text) > budget.budget_bytes():
        fit_result(structured, size_of=lambda s: budget.whole_size(s, text_of(s)), cost=cost)
        text = text_of(structured)
    return structured, text


def present(value: msgspec.Struct) -> tuple[JsonObject, str]:
    """(structuredContent, text): budgeted; the text is the JSON, after MARKER when untrusted."""
    return _fitted(value)


def _body_text(structured: JsonObject) -> str:
    return f"{MARKER}\n\n{structured['body']}"


def _body_cost(where: str, text: str) -> int:
    """The body is in the text block as itself, every other string only in structuredContent."""
    paid = _encoded(text)
    return paid + (paid - 2 if where == "body" else 0)


def present_body(value: msgspec.Struct) -> tuple[JsonObject, str]:
    """get_ping_body: the text block is MARKER, then the cleaned body itself (not its JSON)."""
    return _fitted(value, _body_text, _body_cost)


def _delete_text(structured: JsonObject) -> str:
    text = orjson.dumps(structured).decode()
    carries_instance_text = bool(structured.get("deleted") or structured.get("failed"))
    return f"{MARKER}\n\n{text}" if carries_instance_text else text


def present_delete(value: msgspec.Struct) -> tuple[JsonObject, str]:
    """delete_check: marked only when it reports the instance's words (the deleted checks, a
    failure). A refusal or a token_issued result is this server's own text, and its token
    instruction must not sit under a sentence saying never to follow what follows."""
    return _fitted(value, _delete_text)


def presented(tools: list[AnyTool]) -> list[AnyTool]:
    """``tools`` with ``present`` as the presenter of each that has none of its own."""
    for tool in tools:
        if tool.presenter is None:
            tool.presenter = present
    return tools
