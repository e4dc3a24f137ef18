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

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config.settings import API_KEY_LENGTH

if TYPE_CHECKING:
    from ..healthchecks.api import HealthchecksApi
    from ..protocol.server import McpServer

KEY_HEADER = "X-Healthchecks-Api-Key"
MAX_SERVERS = 256  # tenants whose server stays built; an older one is rebuilt on its next request
MAX_KINDS = 4096  # keys whose kind (read-only / read-write) is remembered
READ_ONLY_PREFIX, READ_WRITE_PREFIX = "hcr_", "hcw_"

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
    ) -> None:
        self._build = build
        self._make_api = make_api
        self.fallback = fallback
        self.fallback_tenant = fallback_tenant
        self._max_servers = max_servers
        self._max_kinds = max_kinds
        self._servers: dict[str, McpServer] = {}  # tenant -> its server, least recently used first
        self._kinds: dict[str, bool] = {}  # tenant -> its key is read-only
        self.probes = 0  # keys whose kind had to be asked of the instance

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

    async def server_for(self, credential: str, tenant: str) -> McpServer:
        server = self._servers.pop(tenant, None)
        if server is None:
            api = self._make_api(credential)
            read_only = await self._kind(credential, tenant, api)
            server = self._build(api, bool(read_only), tenant)
            if read_only is None:
                return server  # the kind is not known yet: built again on the next request
            if len(self._servers) >= self._max_servers:
                self._servers.pop(next(iter(self._servers)))
        self._servers[tenant] = server
        return server

    async def _kind(self, key: str, tenant: str, api: HealthchecksApi) -> bool | None:
        """Whether the key is read-only: from its prefix, else asked once of the instance."""
        known = self._kinds.get(tenant)
        if known is not None:
            return known
        kind = kind_from_prefix(key)
        if kind is None:
            self.probes += 1
            from ..healthchecks.errors import ApiError

            try:
                answer = await api.key_kind()
            except ApiError:  # the instance is unreachable or odd: decide on a later request
                return None
            if not answer.accepted or answer.read_write is None:
                return None
            kind = not answer.read_write
        if len(self._kinds) >= self._max_kinds:
            self._kinds.pop(next(iter(self._kinds)))
        self._kinds[tenant] = kind
        return kind
