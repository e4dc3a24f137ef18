"""The five write tools. Registered unless HEALTHCHECKS_READ_ONLY=true; all need a read-write key.

Everything that can be checked here is checked before a request is sent: a refusal from
this server costs nothing, and some of the API's own answers to bad input are silent
(schedule beats timeout, "" clears every integration, a missing unique field skips the
upsert lookup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..healthchecks.api import HealthchecksApi, normalise_uuid
from ..healthchecks.errors import NotFound
from ..protocol.tool import Annotations, AnyTool, Tool, ToolError
from .present import present_delete, presented
from .read import UUID_TEXT, require_uuid
from .shaping import (
    CheckDetail,
    CheckedTool,
    Precheck,
    Untrusted,
    calling_api,
    check_detail,
    is_api_failure,
    join_note,
    refuse_separator_items,
    tool_error,
)

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from ..protocol.server import RequestContext
    from .confirm import Verdict

ESSENTIAL = frozenset({"essential"})
MAX_DELETE_TARGETS = 50
SECONDS = Meta(ge=60, le=31_536_000)
TAGS_JOINED_LIMIT = 500  # the database column
KEYWORDS_JOINED_LIMIT = 200  # each of start_kw, success_kw, failure_kw

Tag = Annotated[str, Meta(min_length=1, max_length=TAGS_JOINED_LIMIT, pattern=r"^\S+$")]
Keyword = Annotated[str, Meta(min_length=1, max_length=KEYWORDS_JOINED_LIMIT, pattern=r"^[^,]+$")]
ChannelItem = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^[^,]+$")]
Keywords = Annotated[list[Keyword], Meta(max_length=100)]
UniqueField = Literal["name", "slug", "tags", "timeout", "grace"]

# How each list parameter is stored upstream.
_JOINERS = {"tags": " ", "start_kw": ",", "success_kw": ",", "failure_kw": ","}


class CheckFields(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The fields create_check and update_check share. UNSET = not passed, not sent."""

    name: Annotated[str, Meta(max_length=100, description="Up to 100 characters.")] | UnsetType = (
        UNSET
    )
    slug: (
        Annotated[
            str,
            Meta(
                max_length=100,
                pattern=r"^[a-z0-9-_]*$",
                description=(
                    "Lowercase letters, digits, - and _; up to 100. Needs an instance with API v3. Not unique."
                ),
            ),
        ]
        | UnsetType
    ) = UNSET
    desc: Annotated[str, Meta(description="Free-text description.")] | UnsetType = UNSET
    tags: (
        Annotated[
            list[Tag],
            Meta(
                max_length=250,
                description=(
                    "Tags. Stored space-delimited, so no tag may contain a space; 500 characters in all."
                ),
            ),
        ]
        | UnsetType
    ) = UNSET
    timeout: (
        Annotated[
            int,
            SECONDS,
            Meta(
                description=(
                    "Expected period in seconds, 60…31536000. Makes it a simple check. Not together with schedule."
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    schedule: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=100,
                description=(
                    "A cron expression (5 fields) or a systemd OnCalendar expression, up to 100 "
                    "characters. Not together with timeout."
                ),
            ),
        ]
        | UnsetType
    ) = UNSET
    tz: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=64,
                description=("IANA time zone for schedule, e.g. Europe/Riga."),
            ),
        ]
        | UnsetType
    ) = UNSET
    grace: (
        Annotated[int, SECONDS, Meta(description="Grace time in seconds, 60…31536000.")] | UnsetType
    ) = UNSET
    channels: (
        Annotated[
            Literal["*"] | Annotated[list[ChannelItem], Meta(max_length=100)],
            Meta(
                description=(
                    '"*" for every integration of the project, or a list of integration UUIDs or exact names '
                    "(list_integrations shows them). An empty list is refused: it would switch off all alerting."
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    manual_resume: (
        Annotated[
            bool,
            Meta(
                description=(
                    "When paused, ignore pings until resume_check, instead of un-pausing on the next ping."
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    methods: (
        Annotated[
            Literal["", "POST"],
            Meta(
                description=(
                    '"" accepts HEAD, GET and POST pings; "POST" only POST (others are logged as ign).'
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    start_kw: (
        Annotated[
            Keywords,
            Meta(
                description=(
                    "Keywords that mark a start ping. Stored comma-delimited, so none may contain "
                    "a comma; 200 characters in all."
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    success_kw: (
        Annotated[Keywords, Meta(description="Keywords that mark success. Same rules as start_kw.")]
        | UnsetType
    ) = UNSET
    failure_kw: (
        Annotated[Keywords, Meta(description="Keywords that mark failure. Same rules as start_kw.")]
        | UnsetType
    ) = UNSET
    filter_subject: (
        Annotated[bool, Meta(description="Apply the keywords to email subjects.")] | UnsetType
    ) = UNSET
    filter_body: (
        Annotated[bool, Meta(description="Apply the keywords to email bodies.")] | UnsetType
    ) = UNSET
    filter_http_body: (
        Annotated[bool, Meta(description="Apply the keywords to HTTP request bodies.")] | UnsetType
    ) = UNSET
    filter_default_fail: (
        Annotated[
            bool,
            Meta(
                description=(
                    "When filtering and no keyword matches: count the ping as a failure (else it is ignored)."
                )
            ),
        ]
        | UnsetType
    ) = UNSET


FIELD_NAMES = CheckFields.__struct_fields__


class CreateCheckParams(CheckFields, kw_only=True):
    unique: (
        Annotated[
            list[UniqueField],
            Meta(
                max_length=5,
                description=(
                    "Turns the create into an upsert: if a check already has the same values of these fields (each one "
                    "must also be passed), that check is updated and returned instead (200) of a new one created (201)."
                ),
            ),
        ]
        | UnsetType
    ) = UNSET


class UpdateCheckParams(CheckFields, kw_only=True):
    check: Annotated[str, Meta(min_length=1, max_length=100, description=UUID_TEXT)]


async def refuse_slug_before_v3(api: HealthchecksApi, tool: str, body: JsonObject) -> None:
    """slug needs API v3 (tools.md): refused on an older instance, before the change is sent
    (finding the version may cost one GET status/, once per process)."""
    if "slug" not in body:
        return
    version = await api.detect_api_version()
    if version is not None and version < 3:
        raise ToolError(
            f"{tool}: slug needs an instance with API v3, and this one offers API v{version} only "
            "(Healthchecks before 2.0), so nothing was sent. There the slug follows the name: pass "
            'name, and the instance sets slug to its slugified form ("Nightly backup" -> '
            '"nightly-backup"). Or upgrade the instance.',
            field="slug",
            api_version=version,
        )


def derived_slug_note(api: HealthchecksApi, body: JsonObject) -> list[str]:
    if "name" in body and api.api_version is not None and api.api_version < 3:
        return [
            f"On this instance (API v{api.api_version}) setting name also set slug to the "
            "name's slugified form."
        ]
    return []


def _precheck_fields(tool: str) -> Precheck:
    def precheck(arguments: JsonObject) -> None:
        refuse_separator_items(tool, arguments, "tags", " ", "tags space-delimited")
        for field in ("start_kw", "success_kw", "failure_kw"):
            refuse_separator_items(tool, arguments, field, ",", "keywords comma-delimited")
        refuse_separator_items(
            tool, arguments, "channels", ",", "channels as one comma-separated list"
        )

    return precheck


def request_body(tool: str, params: CheckFields) -> JsonObject:
    """The passed fields as the API takes them; the cross-field rules refused with reasons."""
    if params.timeout is not UNSET and params.schedule is not UNSET:
        raise ToolError(
            f"{tool}: pass timeout or schedule, not both. Upstream, schedule would win and timeout "
            "would be discarded without a word. timeout makes a simple check that expects a ping "
            "every N seconds; schedule makes a cron or OnCalendar check.",
            field="timeout",
        )
    if isinstance(params.channels, list) and not params.channels:
        raise ToolError(
            f'{tool}: channels is an empty list, which the API reads as "no integrations": the '
            "check would look healthy and never tell anyone when it stops. That is refused here; "
            "clearing every integration is done in the web UI, in front of someone who can see what "
            'it means. Pass "*" or the integrations to notify.',
            field="channels",
        )
    body: JsonObject = {}
    for name in FIELD_NAMES:
        value = getattr(params, name)
        if value is UNSET:
            continue
        if name in _JOINERS:
            joined = _JOINERS[name].join(value)
            limit = TAGS_JOINED_LIMIT if name == "tags" else KEYWORDS_JOINED_LIMIT
            if len(joined) > limit:
                raise ToolError(
                    f"{tool}: {name} joined is {len(joined)} characters; Healthchecks stores at most "
                    f"{limit}. Pass fewer or shorter items.",
                    field=name,
                )
            value = joined
        elif name == "channels" and isinstance(value, list):
            # UUIDs are matched as exact lowercase strings; names exactly as given. No spaces: the
            # API treats whitespace as part of an item.
            value = ",".join(normalise_uuid(item) or item for item in value)
        body[name] = value
    return body


class CheckWriteResult(Untrusted, kw_only=True):
    check: CheckDetail
    note: str | None = None


# -- create_check -----------------------------------------------------------------------------


class CreateCheckResult(Untrusted, kw_only=True):
    check: CheckDetail
    created: bool
    outcome: Literal["created", "updated_existing"]
    channels_default_applied: bool
    note: str | None = None


def _create_check(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: CreateCheckParams) -> CreateCheckResult:
        body = request_body("create_check", params)
        default_applied = "channels" not in body
        if default_applied:
            # The API's own default is no integrations: a check that never tells anyone.
            body["channels"] = "*"
        if params.unique is not UNSET:
            missing = [name for name in params.unique if name not in body]
            if missing:
                raise ToolError(
                    f"create_check: unique names {', '.join(missing)}, but "
                    f"{'that field was' if len(missing) == 1 else 'those fields were'} not passed. "
                    "Healthchecks then skips the lookup without a word and creates a duplicate. "
                    "Pass every field unique names.",
                    field="unique",
                )
            body["unique"] = list(dict.fromkeys(params.unique))
        await refuse_slug_before_v3(api, "create_check", body)
        _audit_started(ctx)
        check, created = await calling_api(lambda: api.create_check(body))
        _audit(
            ctx,
            [check.uuid] if isinstance(check.uuid, str) else [],
            "created" if created else "updated_existing",
        )
        notes = []
        if created:
            notes.append("A new check was created (201).")
        else:
            notes.append(
                "unique matched an existing check, which was updated with the fields passed and is "
                "returned (200); no new check was created."
            )
        if default_applied:
            notes.append(
                'channels was not passed, so the default "*" was applied: every integration of '
                "the project is notified."
                + ("" if created else " That replaced the existing check's integration list.")
            )
        return CreateCheckResult(
            check=check_detail(check),
            created=created,
            outcome="created" if created else "updated_existing",
            channels_default_applied=default_applied,
            note=join_note(notes + derived_slug_note(api, body)),
        )

    return CheckedTool(
        name="create_check",
        title="Create a check",
        description=(
            "Creates a check. All parameters are optional; everything is validated here before anything is "
            "sent. timeout (a simple check) and schedule (cron or OnCalendar, with tz) cannot be combined — "
            'passing both is an error, where the API would silently drop timeout. channels defaults to "*" '
            "(every integration): the API's own default is none, which makes a check that never alerts anyone; "
            "the result says when the default was applied. An empty channels list is refused. unique turns the "
            "create into an upsert: when a check with the same values of those fields exists, it is updated "
            "instead and the result says so (outcome updated_existing). A 403 means the account's check limit "
            "is reached. Needs a read-write key."
        ),
        params=CreateCheckParams,
        result=CreateCheckResult,
        # destructive: through unique, a call can overwrite an existing check's fields and integrations.
        annotations=Annotations(
            read_only=False, destructive=True, idempotent=False, open_world=True
        ),
        handler=handler,
        tags=ESSENTIAL,
        precheck=_precheck_fields("create_check"),
    )


# -- update_check -----------------------------------------------------------------------------


def _update_check(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: UpdateCheckParams) -> CheckWriteResult:
        uuid = require_uuid("update_check", params.check)
        _audit(ctx, [uuid])
        body = request_body("update_check", params)
        if not body:
            raise ToolError(
                "update_check: no field to change was passed, so nothing was sent. "
                "Pass at least one of: " + ", ".join(FIELD_NAMES) + ".",
                field="check",
            )
        await refuse_slug_before_v3(api, "update_check", body)
        _audit_started(ctx)
        check = await calling_api(lambda: api.update_check(uuid, body))
        _audit(ctx, [uuid], "updated")
        notes = [
            f"Changed: {', '.join(body)}; every other field is as it was.",
            *derived_slug_note(api, body),
        ]
        if "channels" in body:
            notes.append("channels replaced the check's integration list.")
        if "schedule" in body:
            notes.append("The check is now driven by its schedule.")
        elif "timeout" in body:
            notes.append("The check is now a simple check driven by its timeout.")
        return CheckWriteResult(check=check_detail(check), note=join_note(notes))

    return CheckedTool(
        name="update_check",
        title="Update a check",
        description=(
            "🆔 Changes the given fields of a check; anything not passed stays as it was. Takes the "
            "same parameters as create_check (minus unique) plus check, the UUID. Two exceptions "
            'to "not passed stays as it was": channels replaces the integration list rather than '
            "adding to it, and setting schedule on a check that used timeout switches it over "
            "(timeout switches it back). An update with no fields at all is refused rather than "
            "sent, as are timeout with schedule and an empty channels list. A 404 means no such "
            "check in this project; a 403, another project's check. Needs a read-write key."
        ),
        params=UpdateCheckParams,
        result=CheckWriteResult,
        # destructive: channels replaces the list; not guarded (see asking-a-person.md).
        annotations=Annotations(
            read_only=False, destructive=True, idempotent=True, open_world=True
        ),
        handler=handler,
        tags=ESSENTIAL,
        precheck=_precheck_fields("update_check"),
    )


# -- pause_check / resume_check ---------------------------------------------------------------


class OneCheckParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    check: Annotated[str, Meta(min_length=1, max_length=100, description=UUID_TEXT)]


def _refuse_retired_confirm_token(arguments: JsonObject) -> None:
    if "confirm_token" in arguments:
        raise ToolError(
            "pause_check is no longer gated, so it takes no confirm_token and does not need one: call "
            "it again with only check. (Pausing is reversible — resume_check puts the check back — so "
            "it no longer asks first; only delete_check does.)",
            field="confirm_token",
        )


def _pause_check(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: OneCheckParams) -> CheckWriteResult:
        uuid = require_uuid("pause_check", params.check)
        _audit(ctx, [uuid])
        _audit_started(ctx)
        check = await calling_api(lambda: api.pause_check(uuid))
        _audit(ctx, [uuid], "paused")
        return CheckWriteResult(
            check=check_detail(check),
            note=(
                "The check is paused and will not alert: while paused, a job that stops running goes unnoticed. "
                "resume_check restores it."
                + (
                    " With manual_resume it stays paused whatever pings arrive."
                    if check.manual_resume
                    else " Its next ping also un-pauses it."
                )
            ),
        )

    return CheckedTool(
        name="pause_check",
        title="Pause a check",
        description=(
            "🆔 Pauses a check: it stops expecting pings, and stops alerting. What that costs: while paused, a "
            "job that stops running goes unnoticed. resume_check puts it back and nothing is lost in between "
            "(unless manual_resume is set, the check's next ping also un-pauses it). Not gated: it takes no "
            "confirm_token. Pausing an already paused check changes nothing. A 404 means no such check in this "
            "project; a 403, another project's check. Needs a read-write key."
        ),
        params=OneCheckParams,
        result=CheckWriteResult,
        annotations=Annotations(
            read_only=False, destructive=False, idempotent=True, open_world=True
        ),
        handler=handler,
        precheck=_refuse_retired_confirm_token,
    )


def _resume_check(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: OneCheckParams) -> CheckWriteResult:
        uuid = require_uuid("resume_check", params.check)
        _audit(ctx, [uuid])
        _audit_started(ctx)
        check = await calling_api(lambda: api.resume_check(uuid))
        _audit(ctx, [uuid], "resumed")
        return CheckWriteResult(
            check=check_detail(check),
            note=(
                "The check is resumed: it is in the new state, alerting again, and waits for its next ping."
            ),
        )

    return Tool(
        name="resume_check",
        title="Resume a paused check",
        description=(
            "🆔 Puts a paused check back into the new state, waiting for its next ping; alerting is on again. "
            "Not gated: it restores alerting rather than removing it. A 409 means the check was not paused. "
            "A 404 means no such check in this project; a 403, another project's check. Needs a read-write key."
        ),
        params=OneCheckParams,
        result=CheckWriteResult,
        annotations=Annotations(
            read_only=False, destructive=False, idempotent=True, open_world=True
        ),
        handler=handler,
        tags=ESSENTIAL,
    )


# -- delete_check -----------------------------------------------------------------------------

CheckId = Annotated[str, Meta(min_length=1, max_length=100)]


class DeleteCheckParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    check: Annotated[
        CheckId | Annotated[list[CheckId], Meta(min_length=1, max_length=MAX_DELETE_TARGETS)],
        Meta(
            description=(
                f"The UUID of the check to delete, or a list of up to {MAX_DELETE_TARGETS} "
                "UUIDs (duplicates are folded)."
            )
        ),
    ]
    confirm_token: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=128,
                description=(
                    "From the first call of this tool, only where the client cannot show a confirmation dialog."
                ),
            ),
        ]
        | UnsetType
    ) = UNSET


class DeleteFailure(msgspec.Struct, kw_only=True):
    check: str
    error: str


class DeleteCheckResult(Untrusted, kw_only=True):
    outcome: str
    message: str
    targets: list[str]
    confirm_token: str | None = None
    token_expires_in: int | None = None
    deleted: list[CheckDetail]
    failed: list[DeleteFailure] = []  # noqa: RUF012 - msgspec copies it per instance; the schema says "default": []
    not_attempted: list[str] | UnsetType = UNSET  # only when a failure stopped the run
    # A token's checks that the instance no longer knows (404): a token redeemed a second time
    # (by this process or another) finds them gone and deletes nothing new.
    already_deleted: list[str] | UnsetType = UNSET
    note: str | None = None


def _delete_check(api: HealthchecksApi) -> AnyTool:
    async def handler(ctx: RequestContext, params: DeleteCheckParams) -> DeleteCheckResult:
        given = [params.check] if isinstance(params.check, str) else params.check
        targets = sorted({require_uuid("delete_check", value) for value in given})
        from . import confirm  # the guard: a person (or, failing that, the two-call token) decides

        token = None if params.confirm_token is UNSET else params.confirm_token
        _audit(ctx, targets)
        verdict = await confirm.ask_before_delete(ctx, targets, token)
        _audit(ctx, targets, verdict.outcome, confirm.approval(ctx, verdict))
        if not verdict.approved:
            return DeleteCheckResult(
                outcome=verdict.outcome,
                message=verdict.message,
                targets=targets,
                confirm_token=verdict.confirm_token,
                token_expires_in=verdict.token_expires_in,
                deleted=[],
                note="Nothing was deleted.",
            )
        # One at a time, in target order, stopping at the first failure: what is reported deleted was
        # answered 200 by the instance; a failure leaves the rest untouched (not_attempted).
        deleted: list[CheckDetail] = []
        gone: list[str] = []
        total = len(targets)
        # What happened to each check, for the audit line: deleted, already_gone, failed,
        # not_reached (after the first failure). Until the instance answers, not_reached.
        results = dict.fromkeys(targets, "not_reached")
        # Kept on the context as each check is done: a cancellation's line says which went.
        _audit_results(ctx, targets, results)
        _audit_started(ctx)  # before the first DELETE: a crash from here on leaves this line
        for index, uuid in enumerate(targets):
            try:
                deleted.append(check_detail(await api.delete_check(uuid)))
            except Exception as error:
                if not is_api_failure(error):
                    raise
                if isinstance(error, NotFound) and verdict.outcome == "approved_by_token":
                    gone.append(uuid)
                    results[uuid] = "already_gone"
                    _audit_results(ctx, targets, results)
                    await _progress(ctx, index + 1, total, f"check {uuid} was already deleted")
                    continue
                results[uuid] = "failed"
                _audit_results(ctx, targets, results)
                if total == 1:
                    raise tool_error(error) from None
                failure = DeleteFailure(check=uuid, error=tool_error(error).message)
                rest = targets[index + 1 :]
                _audit(ctx, targets, "partly_deleted" if deleted else "failed")
                await _progress(
                    ctx, index + 1, total, f"check {uuid} could not be deleted; stopped"
                )
                return _stopped(verdict, targets, deleted, failure, rest)
            results[uuid] = "deleted"
            _audit_results(ctx, targets, results)
            await _progress(ctx, index + 1, total, f"deleted check {uuid} ({index + 1} of {total})")
        _audit_results(ctx, targets, results)
        # "deleted" only when this call deleted every check; a token used again finds them gone.
        if not gone:
            _audit(ctx, targets, "deleted")
        else:
            _audit(ctx, targets, "partly_deleted" if deleted else "already_gone")
        note = (
            "deleted holds each check as it was just before deletion — the last record of it (its channels "
            "are always empty by then). The UUIDs cannot be reused."
        )
        if gone:
            note = (
                f"{len(gone)} of the {total} checks were already deleted (the instance answers "
                "404: this token was used before, or the check never existed); "
                "nothing new was deleted for them. " + note
            )
        return DeleteCheckResult(
            outcome=verdict.outcome,
            message=verdict.message,
            targets=targets,
            deleted=deleted,
            already_deleted=gone if gone else UNSET,
            note=note,
        )

    return Tool(
        name="delete_check",
        title="Delete a check permanently",
        description=(
            "👤 🆔 Deletes a check permanently — or up to 50 at once. Asks a person first: a "
            "confirmation dialog the model cannot answer. The UUID cannot be recovered and no new "
            "check can take it, so everything still pinging that URL breaks; pause_check is the "
            "reversible alternative. Where the client cannot show a dialog, the first call returns "
            "a confirm_token and deletes nothing; calling again with the same check argument and "
            "that token goes ahead (this only proves the call was made twice). The result keeps "
            "the deleted checks as the API returns them — the last record of what each was. "
            "Several checks are deleted one at a time, and the first failure stops the rest: the "
            "result lists deleted, failed and not_attempted, and a check is listed as deleted only "
            "when the instance confirmed it. A request that carries a progressToken gets one "
            "progress notification per check. A 404 means no such check (or already deleted); a "
            "403, another project's check. Needs a read-write key."
        ),
        params=DeleteCheckParams,
        result=DeleteCheckResult,
        annotations=Annotations(
            read_only=False, destructive=True, idempotent=True, open_world=True
        ),
        handler=handler,
        presenter=present_delete,
    )


def _audit(
    ctx: RequestContext,
    checks: list[str],
    outcome: str | None = None,
    approved_by: str | None = None,
) -> None:
    """What the audit line of this call says (protocol/audit.py writes it when the call ends)."""
    if not hasattr(ctx, "audit_checks"):
        return  # a stand-in context (a unit test's): nothing will write the line
    ctx.audit_checks = list(checks)
    if outcome is not None:
        ctx.audit_outcome = outcome
    if approved_by is not None:
        ctx.approved_by = approved_by


def _audit_started(ctx: RequestContext) -> None:
    """The audit line written before the tool writes upstream: what it is about to act on and
    how that was approved (outcome ``started``); its final line follows when the call ends."""
    started = getattr(ctx, "audit_started", None)
    if started is not None:
        started()


def _audit_results(ctx: RequestContext, targets: list[str], results: dict[str, str]) -> None:
    """The audit line's per-check word, in the order of its checks."""
    if hasattr(ctx, "audit_results"):
        ctx.audit_results = [results[uuid] for uuid in targets]


async def _progress(ctx: RequestContext, progress: int, total: int, message: str) -> None:
    # A request context without report_progress (a test's stand-in, the CLI's) reports nothing.
    report = getattr(ctx, "report_progress", None)
    if report is not None:
        await report(progress, total, message)


def _stopped(
    verdict: Verdict,
    targets: list[str],
    deleted: list[CheckDetail],
    failure: DeleteFailure,
    rest: list[str],
) -> DeleteCheckResult:
    """The first failure ends the run: say exactly which were deleted, which failed, which were not tried."""
    summary = (
        f"Stopped at the first failure: {len(deleted)} of {len(targets)} checks were deleted, "
        f"{failure.check} was not ({failure.error})"
        + (f", and {len(rest)} more were not attempted: " + ", ".join(rest) if rest else "")
        + "."
    )
    if not deleted:
        raise ToolError(
            "None of the checks was deleted. " + summary,
            kind="delete_failed",
            failed=[msgspec.to_builtins(failure)],
            not_attempted=rest,
            deleted=[],
        )
    note = (
        summary
        + " deleted holds each deleted check as it was just before deletion. Call delete_check "
        "again for the ones not deleted once the cause is fixed."
    )
    return DeleteCheckResult(
        outcome=verdict.outcome,
        message=verdict.message,
        targets=targets,
        deleted=deleted,
        failed=[failure],
        not_attempted=rest,
        note=note,
    )


def write_tools(api: HealthchecksApi) -> list[AnyTool]:
    return presented(
        [
            _create_check(api),
            _update_check(api),
            _pause_check(api),
            _resume_check(api),
            _delete_check(api),
        ]
    )
