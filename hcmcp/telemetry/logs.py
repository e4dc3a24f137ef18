"""Log lines on stderr: human text (the default) or one JSON object per line.

``configure(format, level)`` is called once by the command. ``emit`` writes one event line when
its level is enabled; ``always`` writes one whatever the level (the audit trail). Python's
logging, where the server uses it, is routed through the same format (``install_logging``).
JSON lines carry at least ``time`` (UTC, RFC 3339 with milliseconds), ``level`` and ``event``,
and the trace id of the request being served when it has one. No knowledge of what is logged.
"""

from __future__ import annotations

import sys
import time
from typing import Any

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
FORMATS = ("text", "json")

_format = "text"
_level = LEVELS["warning"]


def configure(format: str = "text", level: str = "warning") -> None:
    global _format, _level
    if format not in FORMATS or level not in LEVELS:
        raise ValueError(f"log format {format!r} / level {level!r}")
    _format = format
    _level = LEVELS[level]


def json_mode() -> bool:
    return _format == "json"


def enabled(level: str) -> bool:
    return LEVELS[level] >= _level


def _timestamp(when: float) -> str:
    seconds = int(when)
    millis = int((when - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


# What a text-mode value may hold unquoted: visible ASCII but for quotes, the backslash and the
# comma (which separates a list's items). Anything else is written as a Python string literal, in
# which every character that could end a line or pass for something else is escaped.
_BARE = frozenset(chr(c) for c in range(0x21, 0x7F)) - set("\"'\\,")


def escaped(text: str) -> str:
    """``text`` with every character that is not printable (controls such as CR, LF and ESC,
    format characters such as bidirectional overrides, and every space but the ASCII one: the
    non-breaking and the line and paragraph separators) written as a Python escape, so that
    nothing a client or the instance sends can start a line or disguise a field."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _scalar(text: str) -> str:
    # repr() quotes, and escapes what escaped() escapes (str.isprintable is its rule too).
    return text if text and set(text) <= _BARE else repr(text)


def _text_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_scalar(str(item)) for item in value) or "-"
    return _scalar(str(value))


def format_line(level: str, event: str, message: str | None, fields: dict[str, Any]) -> str:
    """One line (without its newline) in the configured format."""
    from .context import current

    scope = current()
    if scope is not None and scope.trace_id is not None and "trace_id" not in fields:
        fields = {**fields, "trace_id": scope.trace_id}
    if _format == "json":
        return json_line(level, event, message, fields)
    pairs = " ".join(
        f"{key}={_text_value(value)}" for key, value in fields.items() if value is not None
    )
    head = f"hcmcp: {level.upper()} {event}"
    message = escaped(message) if message else message
    return " ".join(
        part for part in (head + ":" if message or pairs else head, message, pairs) if part
    )


def json_line(
    level: str, event: str, message: str | None, fields: dict[str, object] | None = None
) -> str:
    """One JSON object (without its newline), whatever the configured format."""
    import orjson

    record: dict[str, object] = {"time": _timestamp(time.time()), "level": level, "event": event}
    if message is not None:
        record["message"] = message
    for key, value in (fields or {}).items():
        if value is not None:
            record[key] = value
    return orjson.dumps(record, default=str).decode()


def _write(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: a log line is not worth failing a request
        pass


def emit(level: str, event: str, message: str | None = None, **fields: Any) -> None:
    """One line when ``level`` is enabled; fields whose value is None are left out."""
    if LEVELS[level] >= _level:
        _write(format_line(level, event, message, fields))


def always(event: str, message: str | None = None, **fields: Any) -> None:
    """One line at level "notice"-like importance, written at every log level (the audit trail)."""
    _write(format_line("info", event, message, fields))


def plain(text: str, event: str = "notice", level: str = "info") -> None:
    """A line the server writes as plain text in text mode (start-up notes, the banner); in JSON
    mode the same words as ``message`` of one object, so that every stderr line parses."""
    if _format == "json":
        _write(format_line(level, event, text.removeprefix("hcmcp: "), {}))
    else:
        _write(text)


def install_logging() -> None:
    """Route Python's logging to stderr in the configured format and level (replaces handlers)."""
    import logging

    level_name = {value: key for key, value in LEVELS.items()}.get(_level, "warning")

    class _Formatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            level = record.levelname.lower()
            message = record.getMessage()
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info:
                fields["exception"] = self.formatException(record.exc_info)
            if _format == "json":
                return format_line(level, "log", message, fields)
            text = f"hcmcp: {record.levelname} {record.name}: {escaped(message)}"
            if "exception" in fields:
                text += "\n" + fields["exception"]
            return text

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level_name])
