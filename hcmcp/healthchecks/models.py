"""msgspec Structs of the Healthchecks API's objects, and the listings that carry them.

Fields that appear only sometimes (by key kind, by check kind, by whether a run was
measured) default to UNSET, so "absent upstream" stays distinguishable from "empty".
Unknown fields are ignored: the API adds fields over time and that must not break us.
Listings keep the entries that are objects of the expected shape and *count* the rest
(``malformed``), so a tool can say what it left out instead of dropping it silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import msgspec
from msgspec import UNSET, UnsetType

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonValue


class CheckHead(msgspec.Struct, kw_only=True, gc=False):
    """The fields of a check that list_checks returns and filters on (name, slug, tags, status),
    its identity, and what ``as_v3`` needs. msgspec decodes only the fields a Struct declares and
    skips the rest of each object unread into Python, so a listing decoded into these never builds
    the description, the URLs or the keywords of checks it will not show: at 5,000 checks that was
    about half of a list_checks call (issue 34). ``gc=False``: every field is a str, int, bool or
    None, so no cycle can pass through one, and thousands of them decoded at once no longer set
    off the collector (Check inherits it)."""

    name: str = ""
    slug: str = ""
    tags: str = ""  # space-separated, as stored
    grace: int | UnsetType = UNSET
    status: str = ""
    started: bool = False
    last_ping: str | None = None
    next_ping: str | None = None
    # read-write key only
    uuid: str | UnsetType = UNSET
    # read-only key only
    unique_key: str | UnsetType = UNSET
    # by kind: simple checks have timeout; cron / OnCalendar checks have schedule and tz
    timeout: int | UnsetType = UNSET
    schedule: str | UnsetType = UNSET
    tz: str | UnsetType = UNSET

    @property
    def identifier(self) -> str:
        """The identifier this key can use: uuid (RW shape) or unique_key (RO shape)."""
        if isinstance(self.uuid, str):
            return self.uuid
        return self.unique_key if isinstance(self.unique_key, str) else ""

    @property
    def schedule_kind(self) -> str:
        # The API has no kind field, only the presence of one or the other.
        return "schedule" if isinstance(self.schedule, str) else "timeout"

    @property
    def tag_list(self) -> list[str]:
        return self.tags.split()


# A full Check (get_check) or only the head a listing decodes (versions.as_v3 takes either).
AnyCheck = TypeVar("AnyCheck", bound=CheckHead)


class Check(CheckHead, kw_only=True):
    """``Check.to_dict``: the RW shape has uuid/urls/channels, the RO shape unique_key. The
    fields CheckHead declares, and the rest: what get_check shows."""

    desc: str = ""
    n_pings: int | UnsetType = UNSET
    manual_resume: bool = False
    methods: str = ""
    subject: str = ""  # deprecated mirrors of success_kw / failure_kw
    subject_fail: str = ""
    start_kw: str = ""  # comma-separated
    success_kw: str = ""
    failure_kw: str = ""
    filter_subject: bool = False
    filter_body: bool = False
    filter_http_body: bool = False
    filter_default_fail: bool = False
    badge_url: str | UnsetType = UNSET
    last_duration: int | UnsetType = UNSET
    # read-write key only
    ping_url: str | UnsetType = UNSET
    update_url: str | UnsetType = UNSET
    pause_url: str | UnsetType = UNSET
    resume_url: str | UnsetType = UNSET
    channels: str | UnsetType = UNSET  # comma-separated integration UUIDs, "" when none


class Ping(msgspec.Struct, kw_only=True):
    type: str
    date: str
    n: int
    scheme: str | None = None
    remote_addr: str | None = None
    method: str | None = None
    ua: str | None = None
    rid: str | None = None
    body_url: str | None = None
    duration: float | UnsetType = UNSET


class Flip(msgspec.Struct, kw_only=True):
    timestamp: str
    up: int  # 1 only when the new status is up; pause and resume flips are 0 too


class Integration(msgspec.Struct, kw_only=True):
    id: str
    name: str = ""
    kind: str = ""


class BadgeUrls(msgspec.Struct, kw_only=True):
    svg: str = ""
    svg3: str = ""
    json: str = ""
    json3: str = ""
    shields: str = ""
    shields3: str = ""


T = TypeVar("T")


@dataclass
class Listing(Generic[T]):
    """What a collection endpoint returned: the readable entries, and how many were not."""

    items: list[T]
    malformed: int = 0  # entries that were not objects, or objects of the wrong shape


@dataclass
class Badge:
    tag: str  # "*" stands for the whole project
    urls: BadgeUrls


@dataclass
class PingBody:
    # verbatim (the response's buffer), possibly not UTF-8, at most the ceiling
    data: bytes | bytearray
    truncated: bool  # True when the body went on past the ceiling


@dataclass
class StatusAnswer:
    http_status: int
    text: str  # decoded with errors="replace", at most the ceiling
    media_type: str | None
    truncated: bool


@dataclass
class KeyKind:
    """What the two harmless GETs of key_kind() found out."""

    accepted: bool
    read_write: bool | None  # None when the key was not accepted
    detail: str  # a sentence on how this was decided


class _CheckList(msgspec.Struct):
    checks: list[CheckHead]


_CHECK_LIST = msgspec.json.Decoder(_CheckList)
_CHECK = msgspec.json.Decoder(Check)


def checks_from_json(body: bytes | bytearray) -> Listing[CheckHead] | None:
    """The answer of ``checks/`` decoded straight into CheckHeads, in one typed pass, when every
    entry is a check; None otherwise: then the document is decoded as JSON and entries_of decides
    what to keep and what to count, and the instance's mistakes get their own texts. (Decoding to
    dicts and converting each entry cost twice the time for the same result; decoding every field
    into full Checks, half of a list_checks call at 5,000 checks.)"""
    try:
        checks = _CHECK_LIST.decode(body).checks
    except msgspec.DecodeError:  # ValidationError is one too
        return None
    if not all(check.identifier for check in checks):
        return None
    return Listing(checks)


def check_from_json(body: bytes | bytearray) -> Check | None:
    """One check object decoded straight from the answer's bytes, as check_of would accept it; None
    when it is not one (check_of on the decoded document then says why)."""
    try:
        check = _CHECK.decode(body)
    except msgspec.DecodeError:
        return None
    return check if check.identifier else None


def entries_of(document: JsonValue, key: str, entry_type: type[T]) -> Listing[T]:
    """``document[key]`` (a list: the API checked it) as a Listing: objects of the right shape
    kept, the rest counted."""
    items: list[T] = []
    malformed = 0
    for entry in cast("dict[str, list[JsonValue]]", document)[key]:
        if not isinstance(entry, dict):
            malformed += 1
            continue
        try:
            item = msgspec.convert(entry, entry_type)
        except msgspec.ValidationError:
            malformed += 1
            continue
        if isinstance(item, CheckHead) and not item.identifier:
            malformed += 1  # every field of a Check has a default: {} would pass as one
            continue
        items.append(item)
    return Listing(items, malformed)


def badges_of(document: JsonValue) -> Listing[Badge]:
    """``document["badges"]`` (an object: the API checked it) as a Listing."""
    items: list[Badge] = []
    malformed = 0
    for tag, entry in cast("dict[str, dict[str, JsonValue]]", document)["badges"].items():
        if not isinstance(entry, dict):
            malformed += 1
            continue
        try:
            items.append(Badge(tag, msgspec.convert(entry, BadgeUrls)))
        except msgspec.ValidationError:
            malformed += 1
    return Listing(items, malformed)


def check_of(document: JsonValue) -> Check:
    """One check object; raises msgspec.ValidationError when it is not one."""
    if not isinstance(document, dict):
        raise msgspec.ValidationError(f"expected a JSON object, got {type(document).__name__}")
    check = msgspec.convert(document, Check)
    if not check.identifier:
        # Every field has a default, so any object converts: {"checks": ...} or {} would pass
        # as a check with no name and no identity. A real one always carries uuid or unique_key.
        raise msgspec.ValidationError(
            "expected a check object, which carries a uuid or a unique_key; this one has neither"
        )
    return check
