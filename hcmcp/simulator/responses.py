"""The simulator's answers as Django writes them, and its query parameters as Django reads them.

Every response the simulated instance sends is built here: the exact headers (the security set,
X-Frame-Options, CORS for the API routes) and the exact JSON formatting of ``JsonResponse``.
``_Http404`` and a ``Refusal`` (``_refusal``) end a request early with one of them.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from hcmcp.http.messages import Refusal, Response, StreamingResponse

_R = TypeVar("_R", bound=Response | StreamingResponse)  # _cors gives back what it was given

NOT_FOUND_PAGE = (
    b'\n<!doctype html>\n<html lang="en">\n<head>\n  <title>Not Found</title>\n</head>\n'
    b"<body>\n  <h1>Not Found</h1><p>The requested resource was not found on this "
    b"server.</p>\n</body>\n</html>\n"
)
HTML = "text/html; charset=utf-8"
JSON = "application/json"
_SECURITY_HEADERS = [
    ("Vary", "Cookie"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
]


def _response(
    status: int,
    body: bytes = b"",
    content_type: str = HTML,
    extra: list[tuple[str, str]] | None = None,
    frame_options: bool = True,
) -> Response:
    headers = [("Content-Type", content_type)] + (extra or [])
    if frame_options:
        headers.append(("X-Frame-Options", "DENY"))
    return Response(status, body, headers + _SECURITY_HEADERS)


def _json(status: int, obj: Any) -> Response:
    # json.dumps' defaults (", " / ": ", ASCII escapes) are exactly Django's JsonResponse.
    return _response(status, json.dumps(obj).encode(), JSON)


def _error(message: str, status: int = 400) -> Response:
    return _json(status, {"error": message})


def _cors(response: _R, methods: str) -> _R:
    response.headers[1:1] = [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Allow-Headers", "X-Api-Key"),
        ("Access-Control-Allow-Methods", methods),
        ("Access-Control-Max-Age", "600"),
    ]
    return response


class _Http404(Exception):
    """Django's Http404: the HTML "Not Found" page, without CORS headers."""


def _refusal(response: Response) -> Refusal:
    """An early answer (a bad key, body or identifier) that ends the request."""
    return Refusal(response.status, response=response)


def _last(query: list[tuple[str, str]], name: str) -> str | None:
    """A query parameter as Django reads it: the last of repeated values."""
    values = [value for key, value in query if key == name]
    return values[-1] if values else None


def _timestamp_param(value: str | None) -> float | None:
    if value is None:
        return None
    number = int(value)  # ValueError for "", "1.5", "abc": a 400 with no body
    if not 0 <= number <= 10_000_000_000:
        raise ValueError("out of bounds")
    return float(number)


def _seconds_param(value: str | None) -> int | None:
    if value in (None, ""):
        return None
    number = int(re.sub(r"\.0*\s*$", "", value))  # Django's IntegerField allows "60.0"
    if not 0 <= number <= 31536000:
        raise ValueError("out of range")
    return number
