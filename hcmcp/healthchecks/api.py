"""The Healthchecks Management API: one method per endpoint, HTTP status -> typed errors
(judging.py).

Knows nothing of MCP. Follows healthchecks-api.md §5: the key goes only in X-Api-Key,
UUIDs are lowercased, trailing slashes are exactly as §1 (collections end in "/",
single objects do not), redirects are reported and never followed.

The HTTP client is imported lazily, on the first request: building the tool list must
not pay for the HTTP stack.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import msgspec

from .endpoints import (
    CREATE_CHECK,
    DELETE_CHECK,
    GET_CHECK,
    GET_PING_BODY,
    GET_STATUS,
    LIST_BADGES,
    LIST_CHECKS,
    LIST_FLIPS,
    LIST_INTEGRATIONS,
    LIST_PINGS,
    NO_FIELDS,
    PAUSE_CHECK,
    RESUME_CHECK,
    UPDATE_CHECK,
    Endpoint,
)
from .errors import (
    ApiError,
    InvalidIdentifier,
    MissingApiKey,
    NotJson,
    ResponseTooLarge,
    Unauthorized,
    Unreachable,
)

# Non-2xx answers are judged by judging.Judge, which the API holds.
from .judging import KEY_SETUP, Judge
from .models import (
    AnyCheck,
    Badge,
    Check,
    CheckHead,
    Flip,
    Integration,
    KeyKind,
    Listing,
    Ping,
    PingBody,
    StatusAnswer,
    badges_of,
    check_from_json,
    check_of,
    checks_from_json,
    entries_of,
)

if TYPE_CHECKING:
    from ..http.client.client import HttpClient
    from ..http.client.proxy import ProxyRoute
    from ..http.client.types import HttpResponse
    from ..json_types import JsonObject, JsonValue
    from .endpoints import Fields
    from .upstream_metrics import UpstreamMetrics

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UNIQUE_KEY = re.compile(r"[0-9a-f]{40}")


def normalise_uuid(value: str) -> str | None:
    """The canonical lowercase form Django's uuid converter routes, or None if not a UUID."""
    candidate = value.strip().lower()
    return candidate if _UUID.fullmatch(candidate) else None


def normalise_check_id(value: str) -> str | None:
    """A UUID or a 40-character unique_key (lowercase hex), or None if it is neither."""
    candidate = value.strip().lower()
    if _UUID.fullmatch(candidate) or _UNIQUE_KEY.fullmatch(candidate):
        return candidate
    return None


# -- the API ----------------------------------------------------------------------------------


# Idle keep-alive connections kept to the instance: as many as a busy team's calls may have in
# flight at once. With 16, 32 concurrent calls closed and reopened half the pool every round (a
# connect per call, and a thread started on a threaded upstream), and the slowest calls waited
# longer for it (issue 34, benchmarks/fairness.py). An instance closes the ones it finds idle.
POOL_IDLE = 64


class HealthchecksApi:
    def __init__(
        self,
        site_root: str,
        api_key: str | None,
        *,
        client: HttpClient | None = None,
        api_version: int | None = None,
        timeout: float = 15.0,
        byte_ceiling: int = 5 * 1024 * 1024,
        proxy: ProxyRoute | None = None,
        ca_file: str | None = None,
        insecure_tls: bool = False,
    ) -> None:
        """``api_version`` None: detected on first use (see ``versions``). ``proxy``: a
        ``hcmcp.http.client.proxy.ProxyRoute`` or None; ``ca_file`` / ``insecure_tls``: trust for
        the instance's TLS (``hcmcp.http.client.tls``)."""
        parts = urlsplit(site_root.rstrip("/"))
        self.site_root = site_root.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._root_path = parts.path.rstrip("/")  # a sub-path such as /hc is kept
        self._key = api_key or None
        self._client = client
        self._timeout = timeout
        self.byte_ceiling = byte_ceiling
        self.api_version = api_version  # 3, 2 or 1 once known; None until the instance has said
        self.no_api_found = False  # the last detection saw 404 for every version
        self._proxy = proxy
        self._tls = (ca_file, insecure_tls)
        # What we learned about the key; None until an answer settles it.
        self._key_read_write: bool | None = None
        # What a non-2xx answer means, in words without the key (judging.py).
        self._judge = Judge(self.site_root, self._key, self._key_is_read_only)
        # HCMCP_METRICS: healthchecks/upstream_metrics.py
        self._metrics: UpstreamMetrics | None = None
        import hcmcp

        if hcmcp.observing:
            from .upstream_metrics import UpstreamMetrics

            upstream = UpstreamMetrics()
            self._metrics = upstream if upstream.duration is not None else None

    def __repr__(self) -> str:  # never the key
        return f"HealthchecksApi({self.site_root!r}, key={'set' if self._key else 'unset'})"

    @property
    def credential(self) -> str | None:
        """The key, for what is bound to it (a fingerprint, a derived seal key); never shown."""
        return self._key

    @property
    def has_key(self) -> bool:
        return self._key is not None

    def api_url(self, rel: str = "") -> str:
        """The full URL of an API path, for texts (never carries the key)."""
        return f"{self._origin}{self._prefix()}{rel}"

    def _prefix(self, version: int | None = None) -> str:
        return f"{self._root_path}/api/v{version or self.api_version or 3}/"

    async def detect_api_version(self) -> int | None:
        """The newest API version the instance offers (3, 2, 1), found once and remembered;
        None when the instance did not let it be told (unreachable, or not Healthchecks)."""
        if self.api_version is None:
            from .versions import detect

            self.api_version = await detect(self)
        return self.api_version

    # -- read endpoints ---------------------------------------------------------------------

    async def list_checks(
        self, tags: list[str] | None = None, slug: str | None = None
    ) -> Listing[CheckHead]:
        """The project's checks (or the instance's tag/slug selection), each decoded only as far
        as a listing needs: CheckHead's fields. get_check has the rest."""
        query = [("tag", tag) for tag in tags or ()]
        if slug:
            query.append(("slug", slug))
        response = await self._send(LIST_CHECKS, query=query)
        listing = checks_from_json(response.body)  # one typed pass when the answer is as expected
        if listing is None:
            listing = entries_of(self._document(response, LIST_CHECKS), "checks", CheckHead)
        if self.api_version == 1:
            listing.items = [self._as_v3(check) for check in listing.items]
        self._learn_from_checks(listing.items)
        return listing

    async def get_check(self, ident: str) -> Check:
        ident = self._check_id(ident)
        response = await self._send(GET_CHECK, {"check": ident, "kind": _kind_of(ident)})
        check = check_from_json(response.body)  # one typed pass when the answer is as expected
        if check is None:
            check = self._one_check(
                self._document(response, GET_CHECK, {"check": ident}), f"check {ident}"
            )
        else:
            check = self._as_v3(check)
        self._learn_from_checks([check])
        return check

    async def list_pings(self, uuid: str) -> Listing[Ping]:
        uuid = self._uuid(uuid)
        document = await self._json(LIST_PINGS, {"check": uuid})
        return entries_of(document, "pings", Ping)

    async def get_ping_body(self, uuid: str, n: int) -> PingBody:
        uuid = self._uuid(uuid)
        response = await self._send(GET_PING_BODY, {"check": uuid, "n": int(n)})
        return PingBody(response.body, bool(response.truncated))

    async def list_flips(
        self,
        ident: str,
        seconds: int | None = None,
        start: int | None = None,
        end: int | None = None,
    ) -> Listing[Flip]:
        ident = self._check_id(ident)
        query = [
            (name, str(int(value)))
            for name, value in (("seconds", seconds), ("start", start), ("end", end))
            if value is not None
        ]
        document = await self._json(
            LIST_FLIPS, {"check": ident, "kind": _kind_of(ident)}, query=query
        )
        return entries_of(document, "flips", Flip)

    async def list_integrations(self) -> Listing[Integration]:
        document = await self._json(LIST_INTEGRATIONS)
        return entries_of(document, "channels", Integration)

    async def list_badges(self) -> Listing[Badge]:
        document = await self._json(LIST_BADGES)
        return badges_of(document)

    async def get_status(self) -> StatusAnswer:
        """status/ needs no key, so none is sent: an SSO portal answering there must not see it."""
        response = await self._send(GET_STATUS)
        return StatusAnswer(
            response.status,
            response.body.decode("utf-8", "replace"),
            response.media_type,
            bool(response.truncated),
        )

    async def key_kind(self) -> KeyKind:
        """The two harmless GETs of healthchecks-api.md §1 "Telling RO from RW"."""
        try:
            checks = await self.list_checks()
        except Unauthorized as error:
            return KeyKind(False, None, error.message)
        found = [c for c in checks.items if c.identifier]
        shape = ""
        if found:
            shape = (
                " Its check objects carry uuid (the read-write shape)."
                if isinstance(found[0].uuid, str)
                else " Its check objects carry unique_key (the read-only shape)."
            )
        try:
            await self.list_integrations()
        except Unauthorized as error:
            if error.read_only_key:
                return KeyKind(
                    True,
                    False,
                    "GET checks/ accepted the key and GET channels/, which needs a "
                    "read-write key, refused it: the key is read-only." + shape,
                )
            raise
        self._key_read_write = True
        return KeyKind(
            True,
            True,
            "GET checks/ and GET channels/ (which needs a read-write key) both "
            "accepted the key: it is read-write." + shape,
        )

    # -- write endpoints --------------------------------------------------------------------

    async def create_check(self, fields: JsonObject) -> tuple[Check, bool]:
        """(the check, created?) — created is False when ``unique`` matched an existing check
        (200)."""
        response = await self._send(CREATE_CHECK, body=msgspec.json.encode(fields))
        check = self._one_check(self._decode(response, "the new check"), "the new check")
        return check, response.status == 201

    async def update_check(self, uuid: str, fields: JsonObject) -> Check:
        uuid = self._uuid(uuid)
        response = await self._send(UPDATE_CHECK, {"check": uuid}, body=msgspec.json.encode(fields))
        return self._one_check(self._decode(response, f"check {uuid}"), f"check {uuid}")

    async def pause_check(self, uuid: str) -> Check:
        return await self._state_change(PAUSE_CHECK, uuid)

    async def resume_check(self, uuid: str) -> Check:
        return await self._state_change(RESUME_CHECK, uuid)

    async def delete_check(self, uuid: str) -> Check:
        """The deleted check as it was just before (its channels are always "" by then)."""
        uuid = self._uuid(uuid)
        response = await self._send(DELETE_CHECK, {"check": uuid})
        return self._one_check(
            self._decode(response, f"deleted check {uuid}"), f"deleted check {uuid}"
        )

    async def _state_change(self, endpoint: Endpoint, uuid: str) -> Check:
        uuid = self._uuid(uuid)
        response = await self._send(endpoint, {"check": uuid}, body=b"")
        return self._one_check(self._decode(response, f"check {uuid}"), f"check {uuid}")

    # -- plumbing ---------------------------------------------------------------------------

    def _uuid(self, value: str) -> str:
        uuid = normalise_uuid(value)
        if uuid is None:
            raise InvalidIdentifier(
                None,
                f"{_quote(value)} is not a check UUID; this endpoint takes only a "
                "UUID such as 5a2d…-….",
                advice="list_checks shows each check's uuid.",
            )
        return uuid

    def _check_id(self, value: str) -> str:
        ident = normalise_check_id(value)
        if ident is None:
            raise InvalidIdentifier(
                None,
                f"{_quote(value)} is neither a check UUID nor a 40-character unique_key.",
                advice="list_checks shows each check's identifier.",
            )
        return ident

    def _learn_from_checks(self, checks: list[Check] | list[CheckHead]) -> None:
        for check in checks:
            if isinstance(check.uuid, str):
                self._key_read_write = True
                return
            if isinstance(check.unique_key, str):
                self._key_read_write = False
                return

    def http_client(self) -> HttpClient:
        """The HTTP client to the instance (made on first use), for other APIs on other keys to
        share: one connection pool to one origin, whatever the number of keys."""
        return self._http()

    def _http(self) -> HttpClient:
        if self._client is None:
            # lazily: tools/list must not import the HTTP stack
            from ..http.client.client import HttpClient

            context = None
            ca_file, insecure = self._tls
            if self._origin.startswith("https:") and (ca_file or insecure):
                from ..http.client.tls import TlsSettings

                context = TlsSettings(ca_file, insecure).context()
            self._client = HttpClient(
                self._origin,
                overall_timeout=self._timeout,
                byte_ceiling=self.byte_ceiling,
                max_idle=POOL_IDLE,
                origin_setting="HEALTHCHECKS_URL",
                proxy=self._proxy,
                ssl_context=context,
            )
        return self._client

    async def aclose(self) -> None:
        closer = getattr(self._client, "aclose", None)
        if closer is not None:
            await closer()

    async def _json(
        self,
        endpoint: Endpoint,
        fields: Fields = NO_FIELDS,
        *,
        query: list[tuple[str, str]] | None = None,
    ) -> JsonValue:
        response = await self._send(endpoint, fields, query=query)
        return self._document(response, endpoint, fields)

    def _document(
        self, response: HttpResponse, endpoint: Endpoint, fields: Fields = NO_FIELDS
    ) -> JsonValue:
        """The answer's JSON, with the list or object the endpoint expects (``expect_list`` or
        ``expect_object``) checked to be there."""
        document = self._decode(response, endpoint.what.format_map(fields))
        key = endpoint.expect_list or endpoint.expect_object
        if key is not None:
            inner = document.get(key) if isinstance(document, dict) else None
            wanted = list if endpoint.expect_list else dict
            if not isinstance(inner, wanted):
                raise NotJson(
                    response.status,
                    f"The instance answered {endpoint.path.format_map(fields)} with JSON that is "
                    f'not the expected {{"{key}": …}} document.',
                    advice=self._not_healthchecks_advice(),
                )
        return document

    def _decode(self, response: HttpResponse, what: str) -> JsonValue:
        try:
            document: JsonValue = msgspec.json.decode(response.body)
            return document
        except msgspec.DecodeError:
            media = response.media_type or "no content type"
            raise NotJson(
                response.status,
                f"The instance answered the request for {what} with "
                f"{len(response.body)} bytes of {media}, not JSON.",
                advice=self._not_healthchecks_advice(),
            ) from None

    def _one_check(self, document: JsonValue, what: str) -> Check:
        try:
            check = check_of(document)
        except msgspec.ValidationError as error:
            raise NotJson(
                200,
                f"The instance answered the request for {what} with JSON that is not a "
                f"check object ({error}).",
                advice=self._not_healthchecks_advice(),
            ) from None
        return self._as_v3(check)

    def _as_v3(self, check: AnyCheck) -> AnyCheck:
        """A check of an API v1 instance in v3's shape (versions.as_v3); any other as it is."""
        if self.api_version == 1:
            from .versions import as_v3

            return as_v3(check)
        return check

    def _not_healthchecks_advice(self) -> str:
        return (
            f"HEALTHCHECKS_URL ({self.site_root}) may point at something other than a Healthchecks "
            "instance — a login portal or a proxy. get_status shows what answers there."
        )

    async def _send(
        self,
        endpoint: Endpoint,
        fields: Fields = NO_FIELDS,
        *,
        query: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
    ) -> HttpResponse:
        """One call of ``endpoint`` (its path and texts filled with ``fields``); a 2xx answer
        comes back, any other is judged (judging.py) by the endpoint's table."""
        if endpoint.needs_key and self._key is None:
            raise MissingApiKey(
                None,
                "No Healthchecks API key is configured, so nothing was sent.",
                advice=KEY_SETUP,
            )

        rel = endpoint.path.format_map(fields)
        what = endpoint.what.format_map(fields)

        def exchange() -> Awaitable[HttpResponse]:
            return self._exchange(endpoint, rel, what, query=query or [], body=body)

        response = await exchange()
        if self.api_version is None:
            from .versions import settle

            response = await settle(self, response, exchange)
        if 200 <= response.status < 300:  # the answer asked for: nothing to judge
            if endpoint.read_write:
                self._key_read_write = True
            return response
        return await self._judge.judge(response, endpoint, what, fields)

    async def _key_is_read_only(self) -> bool:
        """After a RW-only endpoint said "wrong api key": is the key valid all the same? A key
        found read-only is remembered as such."""
        if self._key_read_write is not None:
            return not self._key_read_write
        try:
            await self._send(LIST_CHECKS)
        except ApiError:
            return False
        self._key_read_write = False
        return True

    async def _exchange(
        self,
        endpoint: Endpoint,
        rel: str,
        what: str,
        *,
        query: list[tuple[str, str]],
        body: bytes | None,
        version: int | None = None,
    ) -> HttpResponse:
        """One request of ``endpoint`` (at ``rel``, its path filled in) at API ``version`` (default:
        the known one, else 3); transport failures typed."""
        from ..http.client.types import BodyTooLarge, ConnectFailed, HttpError, Timeout

        method, needs_key = endpoint.method, endpoint.needs_key

        headers = [("accept", "application/json")]
        if needs_key and self._key is not None:  # _send refuses a request that needs a missing key
            headers.append(("x-api-key", self._key))  # the only place the key ever goes
        if body is not None:
            headers.append(("content-type", "application/json"))
        # The request being served (its trace context, its log line): telemetry/context.py, when
        # something imported it to open a scope; if nothing did, there is none.
        context = sys.modules.get("hcmcp.telemetry.context")
        scope = context.current() if context is not None else None
        if context is not None and scope is not None and scope.traceparent is not None:
            headers += context.trace_headers()
        path = self._prefix(version) + rel
        metrics = self._metrics
        started = time.perf_counter() if metrics is not None else 0.0
        status: int | None = None
        try:
            response = await self._http().request(
                method,
                path,
                query=query,
                headers=headers,
                body=body,
                byte_ceiling=endpoint.ceiling,
                truncate_at_ceiling=endpoint.ceiling is not None,
            )
            status = response.status
            if scope is not None:
                scope.upstream.append(status)
            return response
        except BodyTooLarge as error:
            raise ResponseTooLarge(
                None,
                f"The instance's answer for {what} is larger than "
                f"{error.ceiling} bytes; it was refused rather than returned half-parsed.",
                advice="Narrow the request if the tool allows it, or raise "
                "HEALTHCHECKS_MAX_RESPONSE_BYTES.",
            ) from None
        except Timeout as error:
            # The client's texts are written to be shown and never carry a header value.
            raise Unreachable(
                None,
                f"The request for {what} timed out: {self._judge.scrub(str(error))}",
                advice=_without_key_test(needs_key)
                + "Retry, or raise HEALTHCHECKS_TIMEOUT if the instance is just slow.",
            ) from None
        except ConnectFailed as error:
            raise Unreachable(
                None,
                self._judge.scrub(str(error)),  # it already says what to check
                advice=_without_key_test(needs_key).strip(),
            ) from None
        except HttpError as error:
            raise Unreachable(
                None,
                f"The exchange with {self.site_root} for {what} failed: "
                f"{self._judge.scrub(str(error))}",
                advice=_without_key_test(needs_key).strip(),
            ) from None
        finally:
            if metrics is not None:
                metrics.observe(method, rel, status, time.perf_counter() - started)


def _without_key_test(needs_key: bool) -> str:
    """The pointer to get_status, except in get_status itself (the one call without a key)."""
    return "get_status tests the instance without a key. " if needs_key else ""


def _quote(value: str) -> str:
    shown = value if len(value) <= 60 else value[:60] + "…"
    return repr(shown)


def _kind_of(ident: str) -> str:
    """What a normalised check identifier is, in texts: a 40-character unique_key or a UUID."""
    return "unique_key" if len(ident) == 40 else "UUID"
