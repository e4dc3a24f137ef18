"""The answers of the OAuth endpoints, each with its headers: pages, redirects and JSON.

Every page carries X-Frame-Options: DENY and a CSP that allows no script, no inline style and
no framing (frame-ancestors 'none'); every answer is Cache-Control: no-store (codes, tokens and
the sealed request must not be kept by a cache) and Referrer-Policy: no-referrer (the page's
URL holds the authorization request).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import orjson

from ..http.messages import Response
from ..json_types import JsonObject
from .page import render_problem

NO_STORE = [
    ("cache-control", "no-store"),
    ("pragma", "no-cache"),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
]


EVENTS = frozenset(
    {
        "registered",
        "code_issued",
        "denied",
        "key_refused",
        "throttled",
        "tokens_issued",
        "grant_refused",
    }
)


def count(event: str) -> None:
    """One OAuth event on /metrics (hcmcp_oauth_events_total{event}; a fixed set, no client)."""
    from ..telemetry.metrics import registry

    metrics = registry()
    if metrics is not None:
        assert event in EVENTS
        metrics.counter(
            "hcmcp_oauth_events_total",
            "OAuth events: registrations, codes, tokens, refused keys and grants",
            ("event",),
        ).inc((event,))


def origin_of(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def page(status: int, html: str, redirect_uri: str | None = None) -> Response:
    """An HTML page; ``redirect_uri``: where its form may also lead (form-action)."""
    form_action = "'self'" + (f" {origin_of(redirect_uri)}" if redirect_uri else "")
    csp = (
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        f"form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    )
    return Response(
        status,
        html.encode(),
        [
            ("content-type", "text/html; charset=utf-8"),
            ("x-frame-options", "DENY"),
            ("content-security-policy", csp),
            *NO_STORE,
        ],
    )


def problem(status: int, title: str, message: str, retry_after: float | None = None) -> Response:
    answer = page(status, render_problem(title=title, message=message))
    if retry_after is not None:
        answer.headers.append(("retry-after", str(max(1, int(retry_after + 0.999)))))
    return answer


def redirect(redirect_uri: str, params: dict[str, str]) -> Response:
    """302 to the client's redirect URI with ``params`` added to its query."""
    glue = "&" if urlsplit(redirect_uri).query else "?"
    location = redirect_uri + glue + urlencode(params)
    return Response(302, b"", [("location", location), *NO_STORE])


def json(status: int, document: JsonObject, extra: list[tuple[str, str]] | None = None) -> Response:
    return Response(
        status,
        orjson.dumps(document),
        [("content-type", "application/json"), *NO_STORE, *(extra or [])],
    )


def oauth_error(status: int, error: str, description: str) -> Response:
    """An RFC 6749 section 5.2 error (also RFC 7591's): the code and what to fix."""
    return json(status, {"error": error, "error_description": description})
