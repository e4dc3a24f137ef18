"""Matching a message against a transcript's pattern, and resolving ``${name}`` references.

``strict`` is true when the server under test is hcmcp itself: then ``$hcmcp`` parts (hcmcp's
exact texts, where the spec fixes none) must hold too. Against any other server they are left
out, and only what the spec fixes is matched. The rules are in conformance/transcripts/README.md.
"""

from __future__ import annotations

import json
import re
from typing import Any

from conformance.replay.format import TranscriptError


class Mismatch(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"at {where}: {why}")
        self.where = where
        self.why = why


_JSON_TYPES = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
MATCHERS = (
    "$any",
    "$regex",
    "$contains",
    "$capture",
    "$absent",
    "$includes",
    "$every",
    "$length",
    "$json",
    "$hcmcp",
)
MORE_VALUES = (True, "not-hcmcp")  # "$more": extra keys allowed always, or except against hcmcp


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    for name, kind in _JSON_TYPES.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "any":
        return True
    if name == "number":
        return _type_of(value) in ("integer", "number")
    return _type_of(value) == name


def substitute(
    value: Any, captures: dict[str, Any], defines: dict[str, Any] | None = None, depth: int = 0
) -> Any:
    """``"${name}"`` -> the named value (any type); ``"a ${name} b"`` -> text with it spliced in.

    A name is a capture (a value the server sent: used as it is) or a ``define`` of the transcript
    (a template: the references inside it are resolved in turn, so a defined pattern can use a capture).
    """
    if depth > 8:
        raise TranscriptError("defines refer to each other in a loop")
    defines = defines or {}
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return _resolve(whole.group(1), captures, defines, depth)
        return _PLACEHOLDER.sub(
            lambda m: _as_text(_resolve(m.group(1), captures, defines, depth)), value
        )
    if isinstance(value, dict):
        return {k: substitute(v, captures, defines, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, captures, defines, depth) for v in value]
    return value


def _resolve(name: str, captures: dict[str, Any], defines: dict[str, Any], depth: int) -> Any:
    if name in captures:
        return captures[name]
    if name in defines:
        return substitute(defines[name], captures, defines, depth + 1)
    raise TranscriptError(
        f"${{{name}}} is used before any step captured it "
        f"(captured: {sorted(captures)}; defined: {sorted(defines)})"
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _is_matcher(pattern: Any) -> bool:
    return (
        isinstance(pattern, dict)
        and bool(pattern)
        and all(k.startswith("$") and k != "$more" for k in pattern)
    )


def match(
    pattern: Any, actual: Any, captures: dict[str, Any], where: str = "$", strict: bool = True
) -> None:
    """Raise Mismatch unless ``actual`` fits ``pattern``; captures are added only when all of it fits.

    ``strict``: the server is hcmcp, so ``$hcmcp`` parts must hold as well.
    """
    found: dict[str, Any] = {}
    _match(pattern, actual, found, where, strict)
    captures.update(found)


def _match(pattern: Any, actual: Any, found: dict[str, Any], where: str, strict: bool) -> None:
    if _is_matcher(pattern):
        _apply_matcher(pattern, actual, found, where, strict)
    elif isinstance(pattern, dict):
        if not isinstance(actual, dict):
            raise Mismatch(where, f"expected an object, got {_type_of(actual)} {_short(actual)}")
        more = pattern.get("$more", False)
        if more not in (False, *MORE_VALUES):
            raise TranscriptError(
                f'{where}: "$more" is true, or "not-hcmcp" (extra keys allowed except from hcmcp)'
            )
        allow_more = more is True or (more == "not-hcmcp" and not strict)
        for key, sub in pattern.items():
            if key == "$more":
                continue
            if isinstance(sub, dict) and "$absent" in sub:
                absent = sub["$absent"]
                others = {name: value for name, value in sub.items() if name != "$absent"}
                if absent not in (True, "hcmcp") or (
                    others and (absent is True or not _is_matcher(others))
                ):
                    raise TranscriptError(
                        f'{where}.{key}: write {{"$absent": true}} alone, or {{"$absent": "hcmcp"}}: '
                        "absent from hcmcp, and from others absent or anything (or, with more "
                        'matchers beside it, absent or what they match: {"$absent": "hcmcp", '
                        '"$any": "null"})'
                    )
                if key in actual:
                    if absent is True or strict:
                        raise Mismatch(
                            f"{where}.{key}", f"expected no such key, got {_short(actual[key])}"
                        )
                    if others:
                        _match(others, actual[key], found, f"{where}.{key}", strict)
                continue
            if key not in actual:
                if not strict and _is_matcher(sub) and set(sub) <= {"$hcmcp"}:
                    continue  # only hcmcp's own value was asked for: another server may leave it out
                raise Mismatch(f"{where}.{key}", f"missing (the object has {sorted(actual)})")
            _match(sub, actual[key], found, f"{where}.{key}", strict)
        extra = sorted(set(actual) - set(pattern))
        if extra and not allow_more:
            raise Mismatch(
                where, f'unexpected keys {extra} (add them to the pattern, or "$more": true)'
            )
    elif isinstance(pattern, list):
        if not isinstance(actual, list):
            raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
        if len(actual) != len(pattern):
            raise Mismatch(
                where, f"expected {len(pattern)} items, got {len(actual)}: {_short(actual)}"
            )
        for index, (sub, item) in enumerate(zip(pattern, actual, strict=True)):
            _match(sub, item, found, f"{where}[{index}]", strict)
    else:
        if _type_of(pattern) != _type_of(actual) and not (
            _is_type(pattern, "number") and _is_type(actual, "number")
        ):
            raise Mismatch(
                where, f"expected {_short(pattern)}, got {_type_of(actual)} {_short(actual)}"
            )
        if pattern != actual:
            raise Mismatch(where, f"expected {_short(pattern)}, got {_short(actual)}")


def _apply_matcher(
    pattern: dict[str, Any], actual: Any, found: dict[str, Any], where: str, strict: bool
) -> None:
    unknown = set(pattern) - set(MATCHERS)
    if unknown:
        raise TranscriptError(
            f"{where}: unknown matcher {sorted(unknown)}; known: {list(MATCHERS)}"
        )
    if "$absent" in pattern:
        raise TranscriptError(
            f'{where}: {{"$absent": true}} only makes sense as the value of an object key'
        )
    if "$any" in pattern:
        kinds = pattern["$any"] if isinstance(pattern["$any"], list) else [pattern["$any"]]
        if not any(_is_type(actual, kind) for kind in kinds):
            raise Mismatch(
                where, f"expected any {' or '.join(kinds)}, got {_type_of(actual)} {_short(actual)}"
            )
    if "$regex" in pattern:
        searched = re.search(pattern["$regex"], actual) if isinstance(actual, str) else None
        if searched is None:
            raise Mismatch(
                where, f"expected a string matching /{pattern['$regex']}/, got {_short(actual)}"
            )
        # named groups are captures: (?P<name>...) makes ${name}
        found.update({k: v for k, v in searched.groupdict().items() if v is not None})
    if "$contains" in pattern:
        wanted = (
            pattern["$contains"]
            if isinstance(pattern["$contains"], list)
            else [pattern["$contains"]]
        )
        if not isinstance(actual, str):
            raise Mismatch(
                where,
                f"expected a string containing {wanted}, got {_type_of(actual)} {_short(actual)}",
            )
        missing = [w for w in wanted if w not in actual]
        if missing:
            raise Mismatch(
                where, f"expected the text to contain {missing}, got {_short(actual, 400)}"
            )
    if "$length" in pattern:
        if not isinstance(actual, (list, str, dict)) or len(actual) != pattern["$length"]:
            size = len(actual) if isinstance(actual, (list, str, dict)) else "no"
            raise Mismatch(
                where, f"expected length {pattern['$length']}, got {size}: {_short(actual)}"
            )
    if "$every" in pattern:
        if not isinstance(actual, list):
            raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
        for index, item in enumerate(actual):
            _match(pattern["$every"], item, found, f"{where}[{index}]", strict)
    if "$includes" in pattern:
        _includes(pattern["$includes"], actual, found, where, strict)
    if "$json" in pattern:
        if not isinstance(actual, str):
            raise Mismatch(
                where, f"expected a string of JSON, got {_type_of(actual)} {_short(actual)}"
            )
        try:
            decoded = json.loads(actual)
        except json.JSONDecodeError:
            raise Mismatch(where, f"expected a string of JSON, got {_short(actual)}") from None
        _match(pattern["$json"], decoded, found, f"{where}<json>", strict)
    if "$hcmcp" in pattern and strict:
        _match(pattern["$hcmcp"], actual, found, f"{where}<hcmcp>", strict)
    if "$capture" in pattern:
        name = pattern["$capture"]
        if name in found and found[name] != actual:
            raise Mismatch(where, f"captured {name!r} twice with different values")
        found[name] = actual


def _includes(
    wanted: list[Any], actual: Any, found: dict[str, Any], where: str, strict: bool
) -> None:
    """Each wanted pattern matches a distinct item of ``actual``, in any order (first fit wins)."""
    if not isinstance(actual, list):
        raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
    used: set[int] = set()
    for sub in wanted:
        for index, item in enumerate(actual):
            if index in used:
                continue
            trial = dict(found)
            try:
                _match(sub, item, trial, f"{where}[{index}]", strict)
            except Mismatch:
                continue
            found.update(trial)
            used.add(index)
            break
        else:
            raise Mismatch(where, f"no item matches {_short(sub)} among {_short(actual, 600)}")


def _short(value: Any, limit: int = 200) -> str:
    text = (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if not isinstance(value, bytes)
        else repr(value)
    )
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"
