"""The 14 Healthchecks tools, written the way an SDK user would write them.

Shared by both SDK peers (sdk_server.py on mcp 2.x, fastmcp1_server.py on mcp 1.x) so
that the only difference between them is the SDK. Plain async functions with
pydantic-annotated parameters: each SDK derives the schemas from the signatures.

Deliberately ordinary: one httpx client, `response.json()` on the whole body, no byte
ceilings. That is what the comparison is about, so do not harden these.
Configured by HEALTHCHECKS_URL (site root) and HEALTHCHECKS_API_KEY, like hcmcp.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from typing import Annotated, Any, Literal

from pydantic import Field

try:  # mcp 2.x ships the httpx fork as httpx2; mcp 1.x uses httpx itself.
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the venv
    import httpx

PING_BODY_LIMIT = 64 * 1024
_client: httpx.AsyncClient | None = None
_token_secret = secrets.token_bytes(32)

SUMMARY_FIELDS = (
    "uuid",
    "unique_key",
    "name",
    "slug",
    "tags",
    "status",
    "last_ping",
    "next_ping",
    "timeout",
    "schedule",
    "tz",
)

CheckId = Annotated[str, Field(description="A UUID, or a 40-character unique_key where allowed")]
Uuid = Annotated[str, Field(description="The check's UUID")]
Limit = Annotated[int, Field(ge=1, le=500, description="At most this many entries")]


def _api() -> httpx.AsyncClient:
    global _client
    if _client is None:
        root = os.environ.get("HEALTHCHECKS_URL", "https://healthchecks.io").rstrip("/")
        _client = httpx.AsyncClient(
            base_url=f"{root}/api/v3/",
            headers={"X-Api-Key": os.environ.get("HEALTHCHECKS_API_KEY", "")},
            timeout=10.0,
        )
    return _client


async def _json(method: str, path: str, **kwargs: Any) -> Any:
    response = await _api().request(method, path, **kwargs)
    if response.status_code >= 400:
        raise RuntimeError(f"Healthchecks answered {response.status_code}: {response.text[:200]}")
    return response.json()


def _fields(**values: Any) -> dict[str, Any]:
    """The create/update body: only what was passed, lists joined the way the API stores them."""
    body: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        if name == "tags":
            value = " ".join(value)
        elif name in ("start_kw", "success_kw", "failure_kw"):
            value = ",".join(value)
        elif name == "channels" and isinstance(value, list):
            value = ",".join(value)
        body[name] = value
    return body


async def list_checks(
    tag: list[str] | None = None,
    slug: str | None = None,
    status: Literal["new", "up", "grace", "down", "paused"] | None = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Lists the checks of the project the API key belongs to."""
    params: list[tuple[str, str]] = [("tag", t) for t in tag or []]
    if slug:
        params.append(("slug", slug))
    checks = (await _json("GET", "checks/", params=params))["checks"]
    if status:
        checks = [c for c in checks if c.get("status") == status]
    # Compact summaries, like hcmcp's: descriptions and URLs are get_check's business.
    summaries = [{k: c[k] for k in SUMMARY_FIELDS if k in c} for c in checks[:limit]]
    return {"checks": summaries, "total": len(checks)}


async def get_check(check: CheckId) -> dict[str, Any]:
    """One check with every field."""
    return await _json("GET", f"checks/{check.lower()}")


async def list_pings(
    check: Uuid,
    type: Literal["success", "start", "fail", "log", "ign"] | None = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Recent pings of a check, newest first."""
    pings = (await _json("GET", f"checks/{check.lower()}/pings/"))["pings"]
    if type:
        pings = [p for p in pings if p.get("type") == type]
    return {"pings": pings[:limit]}


async def get_ping_body(check: Uuid, n: Annotated[int, Field(ge=0)]) -> dict[str, Any]:
    """The body a job POSTed with one ping, truncated at 64 KB."""
    response = await _api().get(f"checks/{check.lower()}/pings/{n}/body")
    if response.status_code >= 400:
        raise RuntimeError(f"Healthchecks answered {response.status_code}")
    text = response.text
    return {"body": text[:PING_BODY_LIMIT], "truncated": len(text) > PING_BODY_LIMIT}


async def list_flips(
    check: CheckId,
    seconds: Annotated[int, Field(ge=0, le=31536000)] | None = None,
    start: int | None = None,
    end: int | None = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """The up/down transitions of a check."""
    params = {
        k: v for k, v in (("seconds", seconds), ("start", start), ("end", end)) if v is not None
    }
    flips = (await _json("GET", f"checks/{check.lower()}/flips/", params=params))["flips"]
    return {"flips": flips[:limit]}


async def list_integrations() -> dict[str, Any]:
    """The project's notification integrations."""
    return await _json("GET", "channels/")


async def list_badges() -> dict[str, Any]:
    """The project's status badge URLs."""
    return await _json("GET", "badges/")


async def get_status() -> dict[str, Any]:
    """Whether the instance is reachable and its database answers."""
    response = await _api().get("status/")
    return {"status_code": response.status_code, "text": response.text[:4096]}


async def get_api_key_info() -> dict[str, Any]:
    """Whether the key is accepted, and whether it is read-only or read-write."""
    checks = await _api().get("checks/")
    if checks.status_code == 401:
        return {"accepted": False}
    channels = await _api().get("channels/")
    return {"accepted": True, "read_write": channels.status_code == 200}


async def create_check(
    name: str | None = None,
    slug: str | None = None,
    desc: str | None = None,
    tags: list[str] | None = None,
    timeout: Annotated[int, Field(ge=60, le=31536000)] | None = None,
    schedule: str | None = None,
    tz: str | None = None,
    grace: Annotated[int, Field(ge=60, le=31536000)] | None = None,
    channels: list[str] | Literal["*"] = "*",
    manual_resume: bool | None = None,
    methods: Literal["", "POST"] | None = None,
    unique: list[Literal["name", "slug", "tags", "timeout", "grace"]] | None = None,
) -> dict[str, Any]:
    """Creates a check."""
    body = _fields(**locals())
    return await _json("POST", "checks/", json=body)


async def update_check(
    check: Uuid,
    name: str | None = None,
    slug: str | None = None,
    desc: str | None = None,
    tags: list[str] | None = None,
    timeout: Annotated[int, Field(ge=60, le=31536000)] | None = None,
    schedule: str | None = None,
    tz: str | None = None,
    grace: Annotated[int, Field(ge=60, le=31536000)] | None = None,
    channels: list[str] | Literal["*"] | None = None,
    manual_resume: bool | None = None,
    methods: Literal["", "POST"] | None = None,
) -> dict[str, Any]:
    """Changes the given fields of a check."""
    fields = dict(locals())
    uuid = fields.pop("check").lower()
    return await _json("POST", f"checks/{uuid}", json=_fields(**fields))


async def pause_check(check: Uuid) -> dict[str, Any]:
    """Pauses a check: it stops expecting pings, and stops alerting."""
    return await _json("POST", f"checks/{check.lower()}/pause", content=b"")


async def resume_check(check: Uuid) -> dict[str, Any]:
    """Puts a paused check back into the new state."""
    return await _json("POST", f"checks/{check.lower()}/resume", content=b"")


def _confirm_token(uuid: str) -> str:
    return hmac.new(_token_secret, uuid.encode(), hashlib.sha256).hexdigest()[:32]


async def delete_check(check: Uuid, confirm_token: str | None = None) -> dict[str, Any]:
    """Deletes a check permanently. Call once for a token, then again with it."""
    uuid = check.lower()
    if confirm_token is None or not hmac.compare_digest(confirm_token, _confirm_token(uuid)):
        return {
            "deleted": False,
            "confirm_token": _confirm_token(uuid),
            "message": "Deleting cannot be undone. Call again with this confirm_token.",
        }
    return {"deleted": True, "check": await _json("DELETE", f"checks/{uuid}")}


# (function, read_only, destructive): annotations as the SDKs take them.
TOOLS = [
    (list_checks, True, False),
    (get_check, True, False),
    (list_pings, True, False),
    (get_ping_body, True, False),
    (list_flips, True, False),
    (list_integrations, True, False),
    (list_badges, True, False),
    (get_status, True, False),
    (get_api_key_info, True, False),
    (create_check, False, False),
    (update_check, False, False),
    (pause_check, False, False),
    (resume_check, False, False),
    (delete_check, False, True),
]
