"""Which Management API version the instance offers (v3, else v2, else v1), found once, lazily.

Every version mounts the same views under ``/api/vN/``; an instance older than Healthchecks
2.0 has no ``/api/v3/`` and answers 404 there for every path. The first request goes to v3:

* any answer that only an API view gives (2xx, 400, 401, 403, 405, 409) settles it: v3;
* a 404 is ambiguous (an unknown check answers 404 too), so ``detect`` asks the one endpoint
  that exists whatever the data: ``GET /api/vN/status/`` (no key), for N = 3, 2, 1 — and, on an
  instance older than ``status/`` itself, ``GET /api/vN/checks/``. The first version that
  answers 200 is remembered, and the original request is sent again at that version (a 404
  from a missing route changed nothing, so this is safe for POST and DELETE too);
* anything else (a redirect, a 5xx, no answer) says nothing: the next request tries again.

What differs by version, and what hcmcp does about it (healthchecks-api.md §1):
* v1 reports ``status: "started"`` while a run is in progress; v3 reports the underlying
  status plus ``started: true``. ``as_v3`` turns the one into the other (see its text).
* ``slug`` on create/update needs v3 (tools.md): the write tools refuse it on v1/v2, where
  the instance derives ``slug`` from ``name`` instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from .endpoints import CHECKS_PROBE, STATUS_PROBE
from .errors import ApiError, NotFound

if TYPE_CHECKING:
    from ..http.client.types import HttpResponse
    from .api import HealthchecksApi
    from .endpoints import Endpoint
    from .models import AnyCheck

VERSIONS = (3, 2, 1)
PROVES_ROUTES = frozenset({400, 401, 403, 405, 409})  # answers only an API view gives


async def settle(
    api: HealthchecksApi, response: HttpResponse, resend: Callable[[], Awaitable[HttpResponse]]
) -> HttpResponse:
    """After the first v3 request: remember what ``response`` proves; maybe send it again at
    v2/v1."""
    status = response.status
    if 200 <= status < 300 or status in PROVES_ROUTES:
        api.api_version = 3
        return response
    if status != 404:
        return response
    version = await detect(api)
    api.api_version = version
    if version is None and api.no_api_found:
        raise NotFound(
            404,
            f"No Healthchecks API answers under {api.site_root}: /api/v3/, /api/v2/ and "
            "/api/v1/ all answer 404, even for status/, which every instance has.",
            advice="HEALTHCHECKS_URL must be the site root of the instance, with its sub-path if "
            "it has one (e.g. https://ops.example.com/hc), and without /api/v3/.",
        )
    if version is None or version == 3:
        return response
    return await resend()


async def detect(api: HealthchecksApi) -> int | None:
    """The newest version whose routes exist, by harmless GETs; None when it cannot be told
    (``api.no_api_found`` then says whether every probe answered 404)."""
    api.no_api_found = False
    for version in VERSIONS:
        status = await _probe(api, STATUS_PROBE, version)
        if status == 200:
            return version
        if status != 404:
            return None
    if not api.has_key:
        api.no_api_found = True
        return None
    # status/ is missing in every version: an instance older than status/ (2021). checks/ exists in
    # all.
    for version in VERSIONS:
        status = await _probe(api, CHECKS_PROBE, version)
        if status != 404:
            return (
                version
                if status is not None and (200 <= status < 300 or status in PROVES_ROUTES)
                else None
            )
    api.no_api_found = True
    return None


async def _probe(api: HealthchecksApi, probe: Endpoint, version: int) -> int | None:
    try:
        response = await api._exchange(
            probe,
            probe.path,
            probe.what.format(version=version),
            query=[],
            body=None,
            version=version,
        )
    except ApiError:
        return None
    return response.status


def as_v3(check: AnyCheck, now: float | None = None) -> AnyCheck:
    """A v1 check with ``status: "started"`` as v3 reports it: the status without the run,
    ``started: true``.

    v1 does not send the status underneath the run, so it is rebuilt from what it does send:
    no success or failure ever (``last_ping`` null) is ``new``; a simple check is ``up``,
    ``grace`` or ``down`` by its deadline (last ping + timeout, + grace); a cron or OnCalendar
    check, whose deadline needs its schedule, is ``up`` — what the instance stores for a
    running check that last succeeded, which is when v1 reports "started".
    """
    if check.status != "started":
        return check
    status = "up"
    if check.last_ping is None:
        status = "new"
    elif isinstance(check.timeout, int) and isinstance(check.grace, int):
        try:
            last = datetime.fromisoformat(check.last_ping).timestamp()
        except ValueError:
            last = None
        if last is not None:
            moment = datetime.now(UTC).timestamp() if now is None else now
            deadline = last + check.timeout
            status = (
                "up"
                if moment < deadline
                else "grace"
                if moment < deadline + check.grace
                else "down"
            )
    return msgspec.structs.replace(check, status=status, started=True)
