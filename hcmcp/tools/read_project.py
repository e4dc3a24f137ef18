"""The four read tools about the project and the instance rather than one check: list_integrations,
list_badges, get_status, get_api_key_info; and ``read_tools``, all nine read tools (the five about
checks come from ``read``, with the names all nine share)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..healthchecks.api import HealthchecksApi
from ..healthchecks.judging import KEY_SETUP
from ..protocol.tool import AnyTool, Tool
from . import budget
from .present import presented
from .read import READ, READ_ONLY_REACHABLE, READ_WRITE_ONLY, NoParams, check_tools
from .shaping import (
    Untrusted,
    budget_sentence,
    calling_api,
    fit_entries,
    join_note,
    malformed_sentence,
    remove_control_characters,
)

if TYPE_CHECKING:
    from ..protocol.server import RequestContext

# -- list_integrations ------------------------------------------------------------------------


class IntegrationEntry(msgspec.Struct, kw_only=True):
    id: str
    name: str
    kind: str


class ListIntegrationsResult(Untrusted, kw_only=True):
    integrations: list[IntegrationEntry]
    returned: int
    note: str | None = None


def _list_integrations(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: NoParams) -> ListIntegrationsResult:
        listing = await calling_api(api.list_integrations)
        entries = [IntegrationEntry(id=i.id, name=i.name, kind=i.kind) for i in listing.items]
        fitted = fit_entries(entries, ListIntegrationsResult(integrations=[], returned=0))
        shown = entries[fitted.skipped : fitted.skipped + fitted.kept]
        left_out = fitted.dropped + fitted.skipped
        note = join_note(
            [
                budget_sentence(left_out, "integration", "the web UI lists them all")
                if left_out
                else "",
                malformed_sentence(listing.malformed, "integration") if listing.malformed else "",
            ]
        )
        return ListIntegrationsResult(integrations=shown, returned=len(shown), note=note)

    return Tool(
        name="list_integrations",
        title="List notification integrations",
        description=(
            "🔑 The project's notification integrations (id, name, kind), with the ids that "
            "create_check and update_check accept in channels (exact names work too). "
            "Integrations themselves can only be created in the web UI; the Management API has no "
            "endpoint for it. 🔑 Needs a read-write key: Healthchecks refuses a read-only key with "
            '401 "wrong api key" here.'
        ),
        params=NoParams,
        result=ListIntegrationsResult,
        annotations=READ,
        handler=handler,
    )


# -- list_badges ------------------------------------------------------------------------------

BADGE_TAG_CEILING = 500


class BadgeEntry(msgspec.Struct, kw_only=True):
    tag: str
    svg: str
    svg3: str
    json: str
    json3: str
    shields: str
    shields3: str


class ListBadgesResult(Untrusted, kw_only=True):
    badges: list[BadgeEntry]
    returned: int
    project_tags: int
    note: str | None = None


def _list_badges(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: NoParams) -> ListBadgesResult:
        listing = await calling_api(api.list_badges)
        # The API's order is random (a Python set): "*" first, then by tag, so results are stable.
        badges = sorted(listing.items, key=lambda b: (b.tag != "*", b.tag))
        entries = [
            BadgeEntry(
                tag=b.tag,
                svg=b.urls.svg,
                svg3=b.urls.svg3,
                json=b.urls.json,
                json3=b.urls.json3,
                shields=b.urls.shields,
                shields3=b.urls.shields3,
            )
            for b in badges
        ]
        tags = sum(1 for b in badges if b.tag != "*")
        capped = [e for e in entries if e.tag == "*"] + [e for e in entries if e.tag != "*"][
            :BADGE_TAG_CEILING
        ]
        fitted = fit_entries(capped, ListBadgesResult(badges=[], returned=0, project_tags=0))
        shown = capped[fitted.skipped : fitted.skipped + fitted.kept]
        shown_tags = sum(1 for e in shown if e.tag != "*")
        note = join_note(
            [
                (
                    f"The project has {tags} tags; badges for {shown_tags} of them are shown (at "
                    f"most {BADGE_TAG_CEILING}, and as many as fit in {budget.described()} KiB). "
                    "Every badge URL is built from its tag the same way, so the pattern of the "
                    "ones shown holds for the rest."
                )
                if shown_tags < tags
                else "",
                malformed_sentence(listing.malformed, "badge") if listing.malformed else "",
            ]
        )
        return ListBadgesResult(badges=shown, returned=len(shown), project_tags=tags, note=note)

    return Tool(
        name="list_badges",
        title="List status badges",
        description=(
            "The project's status badge URLs: one entry per tag, plus * for the project as a "
            "whole, each in svg, json and shields form. The plain variants treat a check in "
            "its grace period as up; the ones suffixed 3 report up, late and down separately. "
            "At most 500 tags are returned, and note says how many the project has. Works "
            "with a read-only key."
        ),
        params=NoParams,
        result=ListBadgesResult,
        annotations=READ,
        handler=handler,
    )


# -- get_status -------------------------------------------------------------------------------


class GetStatusResult(msgspec.Struct, kw_only=True):
    """No untrusted marker when the instance said exactly "OK": the text is then this server's own."""

    ok: bool
    instance: str
    http_status: int
    message: str
    answer: str | UnsetType = UNSET
    truncated: bool | UnsetType = UNSET
    control_characters_removed: int | UnsetType = UNSET
    untrusted: bool | UnsetType = UNSET
    source: str | UnsetType = UNSET


def _get_status(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: NoParams) -> GetStatusResult:
        status = await calling_api(api.get_status)
        if status.http_status == 200 and status.text == "OK" and not status.truncated:
            return GetStatusResult(
                ok=True,
                instance=api.site_root,
                http_status=200,
                message=f"The Healthchecks instance at {api.site_root} is reachable and its "
                "database is answering.",
            )
        text, removed = remove_control_characters(status.text)
        if status.http_status >= 400 and _looks_like_html(text):
            text = f"(an HTML page of {len(status.text)} characters, not shown)"
        return GetStatusResult(
            ok=False,
            instance=api.site_root,
            http_status=status.http_status,
            message=(
                f"Something answered at {api.api_url('status/')} with {status.http_status}, but "
                'not the plain "OK" of a healthy Healthchecks instance. answer holds what it said '
                "(untrusted: possibly a login portal or proxy). A 5xx usually means the "
                "instance's database is down; otherwise check HEALTHCHECKS_URL."
            ),
            answer=text,
            truncated=status.truncated,
            control_characters_removed=removed,
            untrusted=True,
            source="healthchecks",
        )

    return Tool(
        name="get_status",
        title="Check the instance is up",
        description=(
            "Whether the configured Healthchecks instance is reachable and its database is "
            "answering. Needs no API key, which makes it the first thing to try when something is "
            'not working: it separates "wrong key" from "wrong URL". An answer of exactly OK is '
            "reported as healthy. Anything else is shown (up to 4 kB, cleaned of control "
            "characters) and marked untrusted: on the one endpoint that takes no key, an SSO "
            "portal or a captive proxy may be what answered."
        ),
        params=NoParams,
        result=GetStatusResult,
        annotations=READ,
        handler=handler,
    )


def _looks_like_html(text: str) -> bool:
    head = text[:2048].lower()
    return "<html" in head or "<!doctype" in head or "<body" in head


# -- get_api_key_info -------------------------------------------------------------------------


class GetApiKeyInfoResult(msgspec.Struct, kw_only=True):
    """This server's own findings: no untrusted marker, and never the key or any part of it."""

    instance: str
    key_configured: bool
    accepted: bool
    key_kind: Literal["read_only", "read_write"] | None
    read_only: bool | None
    read_write: bool | None
    identifiers: str
    reachable_tools: list[str]
    unreachable_tools: list[str]
    detail: str
    api_version: int | None = None


def _version_sentence(version: int | None) -> str:
    if version is None:
        return " Which API version the instance offers could not be told."
    if version == 3:
        return " The instance offers API v3."
    return (
        f" The instance offers API v{version}, not v3 (Healthchecks before 2.0): create_check and "
        "update_check cannot set slug there (the instance derives it from name)"
        + (
            ', and v1\'s "started" status is shown as v3 shows it (the status plus started: true).'
            if version == 1
            else "."
        )
    )


def _get_api_key_info(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: NoParams) -> GetApiKeyInfoResult:
        result = await _key_info(ctx, params)
        if not api.has_key:
            return result  # nothing is sent without a key, not even the version probe
        version = await api.detect_api_version()
        result.api_version = version
        result.detail += _version_sentence(version)
        return result

    async def _key_info(ctx: RequestContext, params: NoParams) -> GetApiKeyInfoResult:
        everything = READ_ONLY_REACHABLE + READ_WRITE_ONLY
        if not api.has_key:
            return GetApiKeyInfoResult(
                instance=api.site_root,
                key_configured=False,
                accepted=False,
                key_kind=None,
                read_only=None,
                read_write=None,
                identifiers="none: without a key no check can be reached",
                reachable_tools=["get_status", "get_api_key_info"],
                unreachable_tools=[
                    t for t in everything if t not in ("get_status", "get_api_key_info")
                ],
                detail="No API key is configured, so nothing was sent. " + KEY_SETUP,
            )
        kind = await calling_api(api.key_kind)
        if not kind.accepted:
            return GetApiKeyInfoResult(
                instance=api.site_root,
                key_configured=True,
                accepted=False,
                key_kind=None,
                read_only=None,
                read_write=None,
                identifiers="none: the key is not accepted",
                reachable_tools=["get_status", "get_api_key_info"],
                unreachable_tools=[
                    t for t in everything if t not in ("get_status", "get_api_key_info")
                ],
                detail=kind.detail,
            )
        if kind.read_write:
            return GetApiKeyInfoResult(
                instance=api.site_root,
                key_configured=True,
                accepted=True,
                key_kind="read_write",
                read_only=False,
                read_write=True,
                identifiers=(
                    "uuid: every tool takes the check's UUID; get_check and list_flips also accept "
                    "a 40-character unique_key."
                ),
                reachable_tools=everything,
                unreachable_tools=[],
                detail=kind.detail,
            )
        return GetApiKeyInfoResult(
            instance=api.site_root,
            key_configured=True,
            accepted=True,
            key_kind="read_only",
            read_only=True,
            read_write=False,
            identifiers=(
                "unique_key: list_checks shows each check's unique_key instead of its uuid; "
                "get_check and list_flips take either."
            ),
            reachable_tools=list(READ_ONLY_REACHABLE),
            unreachable_tools=list(READ_WRITE_ONLY),
            detail=kind.detail + " list_pings, get_ping_body, list_integrations and every write "
            "tool need a read-write key.",
        )

    return Tool(
        name="get_api_key_info",
        title="Describe the API key",
        description=(
            "Which Healthchecks instance is configured, whether the API key is accepted, and "
            "whether it is read-only or read-write — which decides whether checks are identified "
            "by uuid or by unique_key and which tools are reachable at all. Runs two harmless GETs "
            "(checks/ and channels/) to find out rather than guessing from the key's prefix, which "
            "only the hosted service uses. Also says which API version the instance offers (3, or "
            "2 / 1 on an instance older than Healthchecks 2.0). Never shows the key."
        ),
        params=NoParams,
        result=GetApiKeyInfoResult,
        annotations=READ,
        handler=handler,
    )


def project_tools(api: HealthchecksApi) -> list[AnyTool]:
    return [_list_integrations(api), _list_badges(api), _get_status(api), _get_api_key_info(api)]


def read_tools(api: HealthchecksApi) -> list[AnyTool]:
    """All nine read tools, in the order tools/list shows them: the five about checks first."""
    return presented([*check_tools(api), *project_tools(api)])
