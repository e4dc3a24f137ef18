"""Every Healthchecks endpoint hcmcp calls, as data: one ``Endpoint`` each.

An endpoint says what it is (method, path, the words texts name it by), which key it needs, how
much of its answer is read, what its JSON answer wraps, and what each refusal means there: the
status-to-message table the judge (judging.py) reads before its general sentence for that status.
``HealthchecksApi._send`` (api.py) takes an endpoint and the values its templates name.

Templates use ``str.format`` fields: ``{check}`` (a UUID or unique_key, as sent), ``{kind}``
("UUID" or "unique_key"), ``{n}`` (a ping number), ``{version}`` (an API version); the judge adds
``{what}``. They are filled only when a text is needed, so a call that succeeds formats nothing
but ``what``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping

    # The values an endpoint's templates name, for one call: {"check": uuid, "n": 3}.
    Fields = Mapping[str, str | int]

NO_FIELDS: Fields = {}

PING_BODY_CEILING = 64 * 1024  # tools.md: ping bodies are truncated at 64 KB
STATUS_CEILING = 4 * 1024  # tools.md: anything but "OK" is shown up to 4 kB
PROBE_CEILING = 4 * 1024  # versions.py: a probe reads only the status line's worth

# The status that stands, in a refusal table, for every 429 and 5xx answer ("try again later").
UNAVAILABLE = 503


@dataclass(frozen=True, slots=True)
class Said:
    """What a refusal means at one endpoint: the sentence ("" keeps the judge's general one for the
    status) and the advice ("" keeps the judge's general advice, if it has one)."""

    message: str = ""
    advice: str = ""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One Healthchecks endpoint as hcmcp calls it."""

    method: str
    path: str  # under /api/vN/, exactly as §1 writes it (collections end in "/")
    what: str  # how texts name what is asked for: "check {check}"
    read_write: bool = False  # served to a read-write key only (a read-only one gets 401)
    needs_key: bool = True  # False: no key is sent at all (status/)
    # Bytes read at most, the rest cut (the answer is kept, marked truncated); None: the configured
    # HEALTHCHECKS_MAX_RESPONSE_BYTES, beyond which the answer is refused.
    ceiling: int | None = None
    judged: bool = True  # False: a non-2xx answer is handed back, not raised (a redirect still is)
    expect_list: str | None = None  # the JSON answer is {expect_list: [...]}
    expect_object: str | None = None  # the JSON answer is {expect_object: {...}}
    refusals: Mapping[int, Said] = field(default_factory=dict)  # status -> what it means here

    def said(self, status: int) -> Said | None:
        """This endpoint's words for a refusal with ``status`` (429 and 5xx: UNAVAILABLE's)."""
        if status == 429 or status >= 500:
            status = UNAVAILABLE
        return self.refusals.get(status)


# -- what several endpoints say alike ---------------------------------------------------------

NO_SUCH_CHECK = Said("There is no check with the {kind} {check} in this project (404).")
OTHER_PROJECT = Said(
    "Check {check} exists but belongs to another project (403); this API key reaches only its own "
    "project's checks."
)
NOT_FOUND_IN_PROJECT = Said("There is no check {check} in this project (404).")
_STATE_CHANGE = {
    404: NOT_FOUND_IN_PROJECT,
    403: OTHER_PROJECT,
    409: Said(
        "Check {check} was not paused, so there was nothing to resume (409).",
        "get_check shows its status; only a paused check can be resumed.",
    ),
}

# -- read endpoints ---------------------------------------------------------------------------

LIST_CHECKS = Endpoint("GET", "checks/", "the list of checks", expect_list="checks")
GET_CHECK = Endpoint(
    "GET", "checks/{check}", "check {check}", refusals={404: NO_SUCH_CHECK, 403: OTHER_PROJECT}
)
LIST_PINGS = Endpoint(
    "GET",
    "checks/{check}/pings/",
    "the pings of check {check}",
    read_write=True,
    expect_list="pings",
    refusals={404: NOT_FOUND_IN_PROJECT, 403: OTHER_PROJECT},
)
GET_PING_BODY = Endpoint(
    "GET",
    "checks/{check}/pings/{n}/body",
    "the body of ping #{n} of check {check}",
    read_write=True,
    ceiling=PING_BODY_CEILING,
    refusals={
        404: Said(
            "Healthchecks has no body for ping #{n} of check {check} (404). That answer means one "
            "of four things: there is no such check, the check has no ping #{n}, that ping "
            "carried no body, or the ping is older than the instance keeps (its ping log "
            "limit: 100 on a free plan, 1000 on a paid one).",
            "Call list_pings to see which pings exist and which have a body_url.",
        ),
        403: OTHER_PROJECT,
        UNAVAILABLE: Said(
            advice="A 503 here means the instance's object storage for ping bodies is briefly "
            "unavailable; retrying in a minute is worth it."
        ),
    },
)
LIST_FLIPS = Endpoint(
    "GET",
    "checks/{check}/flips/",
    "the flips of check {check}",
    expect_list="flips",
    refusals={
        404: NO_SUCH_CHECK,
        403: OTHER_PROJECT,
        400: Said(
            "The instance refused the seconds/start/end parameters (400). seconds must be an "
            "integer 0…31536000, start and end integers 0…10000000000."
        ),
    },
)
LIST_INTEGRATIONS = Endpoint(
    "GET", "channels/", "the project's integrations", read_write=True, expect_list="channels"
)
LIST_BADGES = Endpoint("GET", "badges/", "the project's badges", expect_object="badges")
GET_STATUS = Endpoint(
    "GET", "status/", "the status endpoint", needs_key=False, ceiling=STATUS_CEILING, judged=False
)

# -- write endpoints --------------------------------------------------------------------------

CREATE_CHECK = Endpoint(
    "POST",
    "checks/",
    "a new check",
    read_write=True,
    refusals={
        403: Said(
            "Healthchecks refused to create the check (403): the account has no checks left "
            "(its plan's check limit is reached).",
            "Delete checks you no longer need, or raise the plan's limit.",
        )
    },
)
UPDATE_CHECK = Endpoint(
    "POST",
    "checks/{check}",
    "check {check}",
    read_write=True,
    refusals={
        404: Said("There is no check {check} in this project (404); it may have been deleted."),
        403: OTHER_PROJECT,
    },
)
PAUSE_CHECK = Endpoint(
    "POST", "checks/{check}/pause", "check {check}", read_write=True, refusals=_STATE_CHANGE
)
RESUME_CHECK = Endpoint(
    "POST", "checks/{check}/resume", "check {check}", read_write=True, refusals=_STATE_CHANGE
)
DELETE_CHECK = Endpoint(
    "DELETE",
    "checks/{check}",
    "check {check}",
    read_write=True,
    refusals={
        404: Said(
            "There is no check {check} in this project (404): it does not exist or was already "
            "deleted."
        ),
        403: OTHER_PROJECT,
    },
)

# -- the version probes (versions.py): harmless GETs at one API version -----------------------

STATUS_PROBE = Endpoint(
    "GET",
    "status/",
    "the status/ endpoint at API v{version}",
    needs_key=False,
    ceiling=PROBE_CEILING,
)
CHECKS_PROBE = Endpoint(
    "GET", "checks/", "the checks/ endpoint at API v{version}", ceiling=PROBE_CEILING
)
