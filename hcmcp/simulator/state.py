"""The simulated instance's state and the checks every handler makes: its projects and keys,
its checks, its clock and site root, the API key's verdict (the server's 400/401 in its order),
a check of the caller's project, the check's JSON, a badge's signed URL. ``Simulator`` holds one
``Instance`` and hands it to its handlers (``api``, ``public``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from hcmcp.http.messages import Request, Response
from hcmcp.simulator.model import Check, Flip, Project
from hcmcp.simulator.responses import _error, _Http404, _json, _refusal, _response

RW_KEY = "hcw_sim_project_a_read_write_key"
RO_KEY = "hcr_sim_project_a_read_only_key0"
OTHER_RW_KEY = "hcw_sim_project_b_read_write_key"
OTHER_RO_KEY = "hcr_sim_project_b_read_only_key0"


class Instance:
    """What the instance knows. ``site_root``, ``flood_bytes`` and ``api_versions`` may be changed
    while it serves (``serve`` adopts the bound address; tests set the others)."""

    def __init__(self, *, site_root: str, clock: Callable[[], float]) -> None:
        self.site_root = site_root
        self.clock = clock
        self.flood_bytes = 0
        # The API versions this instance offers: {1, 2} pretends to be an instance older than
        # Healthchecks 2.0 (no /api/v3/), {1} one older than v2; the others answer 404 everywhere.
        self.api_versions: frozenset[int] = frozenset({1, 2, 3})
        self.secret = uuid.uuid4().bytes  # signs badge URLs: stable per instance
        self.project_a = Project("Project A", RW_KEY, RO_KEY, "alice-badge-key")
        self.project_b = Project("Project B", OTHER_RW_KEY, OTHER_RO_KEY, "bob-badge-key")
        self.projects = [self.project_a, self.project_b]
        self.checks: dict[str, Check] = {}  # every project's checks, by uuid

    def authorize(
        self, request: Request, *, read_only_ok: bool
    ) -> tuple[Project, bool, dict[str, Any]]:
        """(project, readonly, parsed body); a Refusal (400/401) in the server's order."""
        body: Any = {}
        if request.method == "POST" and request.body and not read_only_ok:
            try:
                body = json.loads(request.body.decode())
            except ValueError:
                raise _refusal(_error("could not parse request body")) from None
            if not isinstance(body, dict):
                raise _refusal(_error("json validation error: value is not an object"))
        key = request.header("x-api-key")
        if key is None:
            key = str(body["api_key"]) if "api_key" in body else ""
        if len(key) != 32:
            raise _refusal(_error("missing api key", 401))
        for project in self.projects:
            if key == project.rw_key:
                return project, False, body
            if read_only_ok and key == project.ro_key:
                return project, True, body
        raise _refusal(_error("wrong api key", 401))

    def project(self, request: Request) -> Project:
        return self.authorize(request, read_only_ok=False)[0]

    def own_check(self, project: Project, code: str) -> Check:
        check = self.checks.get(code)
        if check is None:
            raise _Http404()
        if check.project is not project:
            raise _refusal(_response(403))  # it exists, in another project
        return check

    def by_unique_key(self, project: Project, key: str) -> Check:
        check = next((c for c in project.checks.values() if c.unique_key == key), None)
        if check is None:
            raise _refusal(_response(404))  # empty, unlike the uuid routes' HTML page
        return check

    def check_json(
        self, check: Check, v: int, *, readonly: bool = False, status: int = 200
    ) -> Response:
        return _json(status, check.to_dict(self.site_root, v, self.clock(), readonly=readonly))

    def pause(self, check: Check, now: float | None = None) -> None:
        """Pause as the API does: a flip to paused, the run forgotten; no-op when paused."""
        if check.status != "paused":
            check.flips.append(Flip(self.clock() if now is None else now, check.status, "paused"))
            check.status = "paused"
            check.last_start = None

    def badge_signature(self, badge_key: str, tag: str) -> str:
        key = hashlib.sha1(badge_key.encode() + self.secret).digest()
        digest = hmac.new(key, tag.encode(), hashlib.sha1).digest()
        return urlsafe_b64encode(digest).decode()[:8]

    def badge_url(self, badge_key: str, tag: str, fmt: str, with_late: bool) -> str:
        sig = self.badge_signature(badge_key, tag) + ("" if with_late else "-2")
        if tag == "*":
            return f"{self.site_root}/badge/{badge_key}/{sig}.{fmt}"
        return f"{self.site_root}/badge/{badge_key}/{sig}/{quote(tag, safe='')}.{fmt}"
