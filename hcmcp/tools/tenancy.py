"""One deployment for a team: each HTTP request's own Healthchecks key (HEALTHCHECKS_KEY_SOURCE).

The protocol layer hands over the caller's key as an opaque credential (protocol/streamable_http/tenancy.py)
and asks for the server that answers it. Here a key becomes that server: its own HealthchecksApi
(the key goes upstream in X-Api-Key on that key's requests only), the tool selection for its
kind (read-only keys get the read tools), and a seal keyed for it (protocol/seal.py). Servers
are kept per key fingerprint in a bounded cache, and so is what was learned of each key's kind:
nothing learned for one key is ever used for another, and no key is kept where its fingerprint
serves (a cached server holds its key inside its HealthchecksApi, which must send it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..config.settings import API_KEY_LENGTH
from ..protocol.streamable_http.tenancy import CredentialUnchecked, NoCredential

if TYPE_CHECKING:
    import anyio

    from ..healthchecks.api import HealthchecksApi
    from ..protocol.server import McpServer

KEY_HEADER = "X-Healthchecks-Api-Key"
MAX_SERVERS = 256  # tenants whose server stays built; an older one is rebuilt on its next request
MAX_KINDS = 4096  # keys whose kind (read-only / read-write) is remembered, and refused keys
# A key becomes a tenant only once the instance has accepted it. What the instance said is
# remembered: an accepted key's kind for an hour (then asked again, so a revoked key is seen), a
# refused key for a minute (a flood of one invented key costs one question a minute). At most
# MAX_VERIFYING keys are asked about at once, each key once at a time; past that a new key is
# answered 503 with Retry-After, never queued.
ACCEPTED_FOR = 3600.0
REFUSED_FOR = 60.0
MAX_VERIFYING = 8
READ_ONLY_PREFIX, READ_WRITE_PREFIX = "hcr_", "hcw_"

V = TypeVar("V")
# build(api, read_only_key, tenant) -> the McpServer for one key (the command knows how).
Build = Callable[["HealthchecksApi", bool, str], "McpServer"]


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a Healthchecks API key, described and never quoted; None if it can.

    As strict as the environment key's check (config.api_key_warning), but a refusal: a request
    key that Healthchecks would refuse with 401 is refused here, before it goes anywhere."""
    problems = []
    if len(key) != API_KEY_LENGTH:
        problems.append(f"has {len(key)} characters, not {API_KEY_LENGTH}")
    if any(not ("!" <= char <= "~") for char in key):
        problems.append("contains characters that are not printable ASCII")
    if not problems:
        return None
    return (
        " and ".join(problems)
        + f": a Healthchecks API key is {API_KEY_LENGTH} printable characters (hcw_ + 28 for "
        "read-write, hcr_ + 28 for read-only); copy it again from Project Settings > API Access"
    )


def kind_from_prefix(key: str) -> bool | None:
    """True for a read-only key, False for read-write, None when its form does not say."""
    if key.startswith(READ_ONLY_PREFIX):
        return True
    if key.startswith(READ_WRITE_PREFIX):
        return False
    return None


class KeyTenancy:
    """protocol.streamable_http.tenancy.Tenancy for Healthchecks keys."""

    header = KEY_HEADER

    def __init__(
        self,
        build: Build,
        make_api: Callable[[str], HealthchecksApi],
        *,
        fallback: McpServer | None = None,
        fallback_tenant: str | None = None,
        max_servers: int = MAX_SERVERS,
        max_kinds: int = MAX_KINDS,
        max_verifying: int = MAX_VERIFYING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._build = build
        self._make_api = make_api
        self.fallback = fallback
        self.fallback_tenant = fallback_tenant
        self._max_servers = max_servers
        self._max_kinds = max_kinds
        self._max_verifying = max_verifying
        self._clock = clock
        self._servers: dict[str, McpServer] = {}  # tenant -> its server, least recently used first
        # tenant -> (its key is read-only, until when that holds), for accepted keys
        self._kinds: dict[str, tuple[bool, float]] = {}
        self._refused: dict[str, tuple[str, float]] = {}  # tenant -> (why, until when)
        self._verifying: dict[str, anyio.Event] = {}  # tenants being asked about now
        self.probes = 0  # keys whose acceptance had to be asked of the instance

    def problem(self, credential: str) -> str | None:
        return key_problem(credential)

    def missing(self, bearer_allowed: bool) -> str:
        where = (
            f"in the {KEY_HEADER} header, or as Authorization: Bearer <key>"
            if bearer_allowed
            else f"in the {KEY_HEADER} header (Authorization carries this server's "
            "HEALTHCHECKS_HTTP_TOKEN)"
        )
        return (
            "Unauthorized: this server serves each caller with their own Healthchecks API key "
            f"(HEALTHCHECKS_KEY_SOURCE=request); send yours {where}"
        )

    def tenant_of(self, credential: str) -> str:
        from ..protocol.tenants import fingerprint

        return fingerprint(credential)

    def challenge(self, credential_sent: bool) -> str:
        return 'Bearer realm="hcmcp"'

    async def verify(self, credential: str, tenant: str) -> bool:
        """Whether the key is read-only, asking the instance now even if it accepted the key
        before (oauth asks this before a code is issued and on every refresh, so that a
        revoked key ends its tokens); NoCredential, CredentialUnchecked as server_for."""
        self._kinds.pop(tenant, None)
        return await self._verified(credential, tenant, self._make_api(credential))

    def refused(self, credential: str, tenant: str) -> str | None:
        known = self._refused.get(tenant)
        if known is None:
            return None
        if known[1] <= self._clock():
            del self._refused[tenant]
            return None
        return known[0]

    async def server_for(self, credential: str, tenant: str) -> McpServer:
        server = self._servers.pop(tenant, None)
        if server is None:
            api = self._make_api(credential)
            read_only = await self._verified(credential, tenant, api)
            server = self._build(api, read_only, tenant)
            if len(self._servers) >= self._max_servers:
                self._servers.pop(next(iter(self._servers)))
        self._servers[tenant] = server
        return server

    async def _verified(self, key: str, tenant: str, api: HealthchecksApi) -> bool:
        """Whether the key is read-only, once the instance has accepted it (asked once at a
        time per key, remembered); NoCredential when it refused it, CredentialUnchecked when it
        cannot be asked now."""
        while True:
            known = self._kinds.get(tenant)
            if known is not None and known[1] > self._clock():
                return known[0]
            refusal = self.refused(key, tenant)
            if refusal is not None:
                raise NoCredential(refusal)
            pending = self._verifying.get(tenant)
            if pending is None:
                break
            await pending.wait()  # the same key is being asked about: its answer serves this too
            if tenant in self._verifying or (
                tenant not in self._kinds and tenant not in self._refused
            ):
                raise CredentialUnchecked(_UNCHECKED)  # that question got no answer
        if len(self._verifying) >= self._max_verifying:
            raise CredentialUnchecked(
                "Service Unavailable: this server is checking as many new keys with the "
                "Healthchecks instance as it allows at once; retry in a few seconds"
            )
        import anyio  # here: only a team deployment ever asks

        done = self._verifying[tenant] = anyio.Event()
        try:
            return await self._ask(key, tenant, api)
        finally:
            del self._verifying[tenant]
            done.set()

    async def _ask(self, key: str, tenant: str, api: HealthchecksApi) -> bool:
        from ..healthchecks.errors import ApiError

        self.probes += 1
        try:
            answer = await api.key_kind()
        except ApiError:  # the instance is unreachable or odd: nothing learned, nothing kept
            raise CredentialUnchecked(_UNCHECKED) from None
        now = self._clock()
        if not answer.accepted:
            why = (
                "Unauthorized: the Healthchecks instance refused this API key (wrong, revoked, "
                "or of another instance); copy it again from Project Settings > API Access"
            )
            _remember(self._refused, tenant, (why, now + REFUSED_FOR), self._max_kinds)
            self._servers.pop(tenant, None)  # its next request asks again (a revoked key: 401)
            raise NoCredential(why)
        prefix = kind_from_prefix(key)
        read_only = prefix if answer.read_write is None else not answer.read_write
        if read_only is None:
            raise CredentialUnchecked(_UNCHECKED)
        _remember(self._kinds, tenant, (read_only, now + ACCEPTED_FOR), self._max_kinds)
        return read_only


_UNCHECKED = (
    "Service Unavailable: this server could not check the API key with the Healthchecks "
    "instance just now; retry in a few seconds (get_status, once connected, tells whether the "
    "instance is reachable)"
)


def _remember(table: dict[str, V], tenant: str, value: V, most: int) -> None:
    table.pop(tenant, None)
    if len(table) >= most:
        table.pop(next(iter(table)))
    table[tenant] = value
