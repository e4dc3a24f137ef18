"""The media-type tests of the Streamable HTTP endpoint (Content-Type, Accept).

Apart from ``transport.py`` so that ``hcmcp/fast_start/http.py`` applies the very same tests
before the heavy imports: this module imports nothing.
"""

from __future__ import annotations


def is_json_content_type(value: str | None) -> bool:
    """Content-Type names application/json (parameters such as charset aside)."""
    return (value or "").split(";", 1)[0].strip().lower() == "application/json"


def accepts_json_and_sse(accept: str) -> bool:
    """Both media types listed, or covered by a wildcard (RFC 9110 §12.5.1)."""
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return bool(types & {"application/json", "application/*", "*/*"}) and bool(
        types & {"text/event-stream", "text/*", "*/*"}
    )
