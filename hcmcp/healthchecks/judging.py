"""What a Healthchecks answer that is not a 2xx means: the typed error (errors.py) with its sentence
and
its advice, and the instance's own words, cut and with the API key taken out in every encoding.

``Judge`` is the collaborator ``HealthchecksApi`` holds: built with the site root, the key and the
one probe it may run (is a refused key valid but read-only?), it judges each answer the API hands
it. security.md: the key never reaches an error text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from .endpoints import Said
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    Redirected,
    Unauthorized,
    Unavailable,
    UnexpectedStatus,
)

if TYPE_CHECKING:
    from ..http.client.types import HttpResponse
    from .endpoints import Endpoint, Fields

UPSTREAM_TEXT_LIMIT = 2000  # security.md: upstream error bodies cut to 2000 characters

KEY_SETUP = (
    "Set HEALTHCHECKS_API_KEY to an API key of the project to manage, from the Healthchecks web "
    "UI under Project Settings › API Access. A read-only key is the right one for most uses: it "  # noqa: RUF001  (the web UI's own breadcrumb)
    "lists and inspects checks and cannot change anything. Pings, ping bodies, integrations and "
    "every change need a read-write key."
)


# The refusals an endpoint may word for itself: the typed error, and the general sentence
# (``{what}`` filled in) and advice used where the endpoint's table (endpoints.py) says nothing.
_REFUSED: dict[int, tuple[type[ApiError], Said]] = {
    400: (
        BadRequest,
        Said(
            "Healthchecks refused the request for {what} (400).",
            "Correct the value the instance names and call again.",
        ),
    ),
    403: (Forbidden, Said("Healthchecks refused access to {what} (403).")),
    404: (NotFound, Said("Healthchecks has no {what} (404).")),
    409: (Conflict, Said("Healthchecks refused the change to {what} (409).")),
}


class Judge:
    """Non-2xx answers judged for one instance and key. ``key_is_read_only``: after a
    read-write-only endpoint said "wrong api key", is the key valid all the same (the API asks the
    instance, once, and remembers)?"""

    def __init__(
        self, site_root: str, key: str | None, key_is_read_only: Callable[[], Awaitable[bool]]
    ) -> None:
        self.site_root = site_root
        self._key = key
        self._key_is_read_only = key_is_read_only

    async def judge(
        self, response: HttpResponse, endpoint: Endpoint, what: str, fields: Fields
    ) -> HttpResponse:
        """A response that is not a 2xx (the API's _send hands over those): the typed error its
        status means at ``endpoint`` (its own words first, then the general ones), or the response
        itself when the endpoint is not judged (a redirect is an error all the same). ``what``
        and ``fields`` fill the texts' templates."""
        status = response.status
        if 300 <= status < 400:
            location = self.scrub(response.header("location") or "")[:300]
            raise Redirected(
                status,
                f"The instance answered {status} with a redirect to {location or '(no Location)'} "
                f"instead of the API's answer for {what}. Redirects are not followed: a followed "
                "POST would silently turn into a GET.",
                location=location or None,
                advice=f"Usually HEALTHCHECKS_URL ({self.site_root}) is wrong — http instead of "
                "https, a path the site redirects, or a site root that is not the "
                "Healthchecks one; it must be the site root, without /api/v3/.",
            )
        if not endpoint.judged:
            return response
        upstream = self._upstream_text(response)
        if status == 401:
            raise await self._unauthorized(response, upstream, what, endpoint.read_write)
        own = endpoint.said(status)
        general = _REFUSED.get(status)
        if general is not None:
            error, said = general
            message = own.message if own is not None and own.message else said.message
            advice = own.advice if own is not None and own.advice else said.advice
            raise error(
                status,
                message.format_map({**fields, "what": what}),
                advice=advice,
                upstream=upstream,
            )
        if status == 405:
            raise MethodNotAllowed(
                status,
                f"Healthchecks does not allow {endpoint.method} for {what} (405).",
                advice=f"HEALTHCHECKS_URL ({self.site_root}) may point at the wrong site, "
                "or the instance is older than API v3.",
                upstream=upstream,
            )
        if status == 429 or status >= 500:
            retry_after = response.header("retry-after")
            wait = (
                f" after {retry_after} seconds"
                if retry_after and retry_after.isdigit()
                else " in a minute"
            )
            reason = "is rate-limiting requests" if status == 429 else "had a server-side failure"
            raise Unavailable(
                status,
                f"The instance {reason} ({status}) while serving {what}.",
                advice=(own.advice if own is not None else "") or f"This is worth retrying{wait}.",
                upstream=upstream,
            )
        raise UnexpectedStatus(
            status,
            f"The instance answered {status} to the request for {what}.",
            advice="HEALTHCHECKS_URL may point at something other than Healthchecks; "
            "get_status shows what answers there.",
            upstream=upstream,
        )

    async def _unauthorized(
        self, response: HttpResponse, upstream: str | None, what: str, rw_only: bool
    ) -> Unauthorized:
        reason = (upstream or "").strip().lower()
        if reason == "missing api key":
            return Unauthorized(
                401,
                'Healthchecks says "missing api key" (401): it got no key of the length '
                "it expects (exactly 32 characters).",
                advice="Check HEALTHCHECKS_API_KEY for a truncated or padded value. " + KEY_SETUP,
            )
        if rw_only and reason == "wrong api key" and await self._key_is_read_only():
            return Unauthorized(
                401,
                f"The API key is read-only, and Healthchecks serves {what} only to a "
                'read-write key. (It answers a read-only key with the same 401 "wrong api '
                'key" as an unknown one; the key itself is valid.)',
                read_only_key=True,
                advice="Use a read-write key of this project (Project Settings › API Access) "  # noqa: RUF001  (the web UI's own breadcrumb)
                "if this is needed; everything else keeps working with this one.",
            )
        if reason == "wrong api key":
            return Unauthorized(
                401,
                'Healthchecks does not accept the API key (401 "wrong api key"): it '
                "matches no project on this instance.",
                advice=f"Check that HEALTHCHECKS_API_KEY belongs to the instance at "
                f"{self.site_root} and was not revoked. " + KEY_SETUP,
            )
        # Not Healthchecks' own wording: likely a proxy or SSO gate in front of it.
        return Unauthorized(
            401,
            f"The request for {what} was refused with 401, but not in Healthchecks' words; "
            "something in front of the instance (a proxy or a login gate) may be asking for "
            "credentials of its own.",
            advice=f"Check HEALTHCHECKS_URL ({self.site_root}) and HEALTHCHECKS_API_KEY; "
            "get_status shows what answers there.",
            upstream=upstream,
        )

    def _upstream_text(self, response: HttpResponse) -> str | None:
        """The instance's words: JSON {"error"} or text; HTML dropped; cut; the key scrubbed."""
        if not response.body:
            return None
        text = response.body.decode("utf-8", "replace")
        if _looks_like_html(text):
            return None  # a proxy's or Django's error page: dropped, never pasted into a context
        try:
            document = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            document = None
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            text = document["error"]
        text = self.scrub(text).strip()
        if len(text) > UPSTREAM_TEXT_LIMIT:
            text = (
                text[:UPSTREAM_TEXT_LIMIT]
                + f"… [cut: {len(text) - UPSTREAM_TEXT_LIMIT} more characters]"
            )
        return text or None

    def scrub(self, text: str) -> str:
        """Upstream text with the key taken out: as sent, URL-encoded or base64'd (an error page
        that echoes the request's headers back, in whatever encoding, must not pass it on)."""
        if not self._key:
            return text
        for form in _key_forms(self._key):
            if form in text:
                text = text.replace(form, "[the API key]")
        return text


@functools.lru_cache(maxsize=4)
def _key_forms(key: str) -> tuple[str, ...]:
    """The key, its URL encodings (as quote() does, and every byte as %XX in either case) and its
    base64 (standard and URL-safe, at each of the three alignments inside a longer encoding)."""
    import base64
    import urllib.parse

    raw = key.encode("utf-8", "surrogateescape")
    forms = {
        key,
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key),
        "".join(f"%{b:02X}" for b in raw),
        "".join(f"%{b:02x}" for b in raw),
    }
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + raw).decode()
            # the characters that depend on the key alone
            forms.add(encoded[4:-4] if pad else encoded.rstrip("="))
            if not pad:
                forms.add(encoded)
    # Longest first, so that a longer form is not left half-replaced by a shorter one inside it.
    return tuple(sorted((form for form in forms if len(form) >= 8), key=len, reverse=True))


_HTML = re.compile(
    r"^\s*(<!doctype\s+html|<html|<head|<body|<\?xml)|<(html|body|head|title|div|p|h1)[\s>]",
    re.IGNORECASE,
)


def _looks_like_html(text: str) -> bool:
    # By content, not Content-Type: Django labels its plain-text 409 "text/html" too.
    return bool(_HTML.search(text[:4096]))
