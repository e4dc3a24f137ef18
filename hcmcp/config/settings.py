"""Every environment variable hcmcp reads, read once at start and parsed strictly.

A value that cannot be parsed stops the server (ConfigError, exit code 1) with a
message naming the variable and the valid values: a typo that fell back to a default
would leave the operator believing something that is not true.
"""

from __future__ import annotations

from collections.abc import Mapping

# ConfigError and the value parsers live in the leaf below this module and config/network.py.
from .parse import ConfigError, parse_bool, parse_state_key

TYPE_CHECKING = (
    False  # not typing.TYPE_CHECKING: importing typing costs start-up time (hcmcp/fast_start/)
)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_URL = "https://healthchecks.io"


class Config:
    """Frozen. A plain class, not a dataclass: importing dataclasses (and re) was a third of the
    time to the first reply (see hcmcp/fast_start/)."""

    api_key: str | None
    site_root: str  # scheme://host[:port][/prefix], no trailing slash, no /api/vN
    read_only: bool
    allow_tools: tuple[str, ...] | None
    deny_tools: tuple[str, ...] | None
    elicitation: bool
    elicitation_timeout: float
    state_key: bytes | None
    request_timeout: float
    max_response_bytes: int
    http_token: str | None
    http_allowed_origins: tuple[str, ...]
    # HEALTHCHECKS_KEY_SOURCE: env (HEALTHCHECKS_API_KEY for every request), request (each HTTP
    # request brings its caller's key) or request-or-env (the caller's key, else the env key).
    key_source: str = "env"
    # HEALTHCHECKS_HTTP_PUBLIC_URL: the public origin (oauth); None: the bound address (loopback)
    http_public_url: str | None = None
    # How the instance is reached (see config/network.py): the proxy, TLS trust, start-up notes.
    proxy: Any = None  # hcmcp.http.client.proxy.ProxyRoute, or None for direct
    ca_file: str | None = None  # HEALTHCHECKS_CA_FILE
    insecure_tls: bool = False  # HEALTHCHECKS_INSECURE_TLS
    startup_notes: tuple[str, ...] = ()  # one stderr line each, printed at start
    # Operating it (issue 25): GET /metrics on the HTTP listener, the stderr format and level.
    metrics: bool = False  # HCMCP_METRICS
    log_format: str = "text"  # HCMCP_LOG_FORMAT: text or json
    log_level: str = "warning"  # HCMCP_LOG_LEVEL: debug, info, warning, error
    result_budget: int = 64 * 1024  # HCMCP_RESULT_BUDGET: bytes of one whole tools/call result

    def __init__(self, **values: object) -> None:
        fields = self.__annotations__
        unknown = set(values) - set(fields)
        missing = {name for name in fields if name not in values and not hasattr(type(self), name)}
        if unknown or missing:
            raise TypeError(
                f"Config: unknown fields {sorted(unknown)}, missing fields {sorted(missing)}"
            )
        for (
            name
        ) in fields:  # a field with a class-level default may be left out, as with a dataclass
            object.__setattr__(
                self, name, values[name] if name in values else getattr(type(self), name)
            )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Config is frozen: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return type(other) is Config and all(
            getattr(self, f) == getattr(other, f) for f in self.__annotations__
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # never show the key or the tokens, not even in a traceback
        return (
            f"Config(site_root={self.site_root!r}, api_key={'set' if self.api_key else 'unset'}, "
            f"read_only={self.read_only}, elicitation={self.elicitation})"
        )


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


def parse_choice(name: str, raw: str | None, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices``, exactly as written (no case folding, no spaces), or ConfigError."""
    if raw is None:
        return default
    if raw in choices:
        return raw
    raise ConfigError(
        f"{name}={raw!r} is not a valid value: use exactly one of {', '.join(choices)} "
        f"(the default is {default})"
    )


def _split_url(url: str) -> tuple[str, str, str] | None:
    """(scheme, authority, path) as the regex ``(?i)([a-z][a-z0-9+.-]*)://([^/?#]*)([^?#]*)`` would
    fullmatch them, or None. Printable ASCII is split by hand (importing re costs ~5 ms of
    start-up);
    anything else goes to the regex itself, so the two can never disagree."""
    if not (url.isascii() and url.isprintable()):
        import re

        match = re.fullmatch(r"(?i)([a-z][a-z0-9+.-]*)://([^/?#]*)([^?#]*)", url)
        return (match.group(1), match.group(2), match.group(3)) if match else None
    colon = url.find(":")
    scheme, rest = url[:colon], url[colon + 3 :]
    if (
        colon < 1
        or url[colon : colon + 3] != "://"
        or not scheme[0].isalpha()
        or not _SCHEME_CHARS.issuperset(scheme)
        or "?" in rest
        or "#" in rest
    ):
        return None
    slash = rest.find("/")
    return (scheme, rest, "") if slash < 0 else (scheme, rest[:slash], rest[slash:])


def _strip_api_suffix(path: str) -> str:
    """``re.sub(r"/api/v\\d+/?$", "", path)`` for a path without a trailing slash."""
    if not (path.isascii() and path.isprintable()):
        import re

        return re.sub(r"/api/v\d+/?$", "", path)
    at = path.rfind("/api/v")
    version = path[at + 6 :]
    return path[:at] if at >= 0 and version and version.isdigit() else path


def parse_site_root(raw: str | None) -> str:
    if raw is None or raw.strip() == "":
        return DEFAULT_URL
    url = raw.strip()
    parts = _split_url(url)
    if parts is None:
        raise ConfigError(
            f"HEALTHCHECKS_URL is not a URL: give the site root, e.g. {DEFAULT_URL} "
            "or http://127.0.0.1:8000 (no query string or fragment)"
        )
    scheme, authority, path = parts[0].lower(), parts[1], parts[2]
    if scheme not in ("http", "https"):
        raise ConfigError(
            f"HEALTHCHECKS_URL uses the scheme {scheme!r}: only http and https are supported"
        )
    if "@" in authority:
        raise ConfigError(
            "HEALTHCHECKS_URL contains credentials (user:password@); remove them — "
            "the API key goes in HEALTHCHECKS_API_KEY"
        )
    if not authority or authority.startswith(":"):
        raise ConfigError(
            "HEALTHCHECKS_URL has no host name: give the site root, e.g. " + DEFAULT_URL
        )
    path = _strip_api_suffix(path.rstrip("/")).rstrip("/")
    return f"{scheme}://{authority.lower()}{path}"


def parse_list(name: str, raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    items = tuple(item.strip() for item in raw.split(",") if item.strip())
    if not items:
        raise ConfigError(
            f"{name} is set but names no tool; unset it, or list tool names separated by commas"
        )
    return items


RESULT_BUDGET_RANGE = (8 * 1024, 16 * 1024 * 1024)


def parse_result_budget(raw: str | None) -> int:
    """HCMCP_RESULT_BUDGET: the bytes one whole tools/call result may take (text block and
    structuredContent), a plain whole number; 64 KiB (about 16k tokens) when unset."""
    if raw is None:
        return 64 * 1024
    low, high = RESULT_BUDGET_RANGE
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or not (low <= int(text) <= high):
        raise ConfigError(
            f"HCMCP_RESULT_BUDGET={raw[:40]!r} is not a valid size: give a whole number of bytes "
            f"from {low} to {high} (the default, 65536, is about 16k tokens)"
        )
    return int(text)


def parse_origins(raw: str | None) -> tuple[str, ...]:
    """HEALTHCHECKS_HTTP_ALLOWED_ORIGINS: each entry an origin as a browser sends it,
    http(s)://host[:port] with no path, query, fragment or credentials (a trailing / is
    dropped)."""
    name = "HEALTHCHECKS_HTTP_ALLOWED_ORIGINS"
    if raw is None:
        return ()
    if not raw.strip():
        raise ConfigError(
            f"{name} is set but empty; unset it, or list origins separated by commas, e.g. "
            "https://gateway.example.com"
        )
    origins = []
    for item in raw.split(","):
        entry = item.strip()
        problem = _origin_problem(entry)
        if problem:
            raise ConfigError(
                f"{name} entry {entry[:80]!r} {problem}. Each comma-separated entry is an origin, "
                "scheme://host[:port] with http or https and nothing after it, e.g. "
                "https://gateway.example.com or http://127.0.0.1:3000"
            )
        origins.append(entry.lower().rstrip("/"))
    return tuple(origins)


def _origin_problem(entry: str) -> str | None:
    if not entry:
        return "is empty (two commas in a row, or one at an end)"
    parts = _split_url(entry.rstrip("/"))
    if parts is None:
        return "is not scheme://host[:port]"
    scheme, authority, path = parts
    if scheme.lower() not in ("http", "https"):
        return f"uses the scheme {scheme}://, which no browser sends as an Origin here"
    if path:
        return "has a path; an origin ends after the host and port"
    if "@" in authority:
        return "carries credentials (user@); an origin has none"
    host, port = authority, ""
    if authority.startswith("["):
        close = authority.find("]")
        host, port = authority[: close + 1], authority[close + 1 :]
        if close < 0 or (port and not port.startswith(":")):
            return "has an IPv6 address without its closing ] or with text after it"
        port = port[1:]
    elif ":" in authority:
        host, _, port = authority.partition(":")
    if not host or any(char in host for char in " \t%") or host in ("[]",):
        return "has no usable host name"
    if ":" in authority and not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
        return f"has the port {port!r}, not a number from 1 to 65535"
    return None


def parse_seconds(name: str, raw: str | None, default: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 < value <= 3600):
        raise ConfigError(
            f"{name}={raw!r} is not a valid number of seconds: use a number "
            "above 0 and at most 3600"
        )
    return value


def parse_bytes(name: str, raw: str | None, default: int) -> int:
    if raw is None:
        return default
    low, high = 64 * 1024, 1024 * 1024 * 1024
    if not raw.strip().isdigit() or not (low <= int(raw) <= high):
        raise ConfigError(
            f"{name}={raw!r} is not a valid size: give a whole number of bytes from {low} to {high}"
        )
    return int(raw)


# The variables that only describe the configured instance, and those only --http reads.
INSTANCE_VARIABLES = (
    "HEALTHCHECKS_API_KEY",
    "HEALTHCHECKS_URL",
    "HEALTHCHECKS_CA_FILE",
    "HEALTHCHECKS_INSECURE_TLS",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)
HTTP_ONLY_VARIABLES = (
    "HEALTHCHECKS_HTTP_TOKEN",
    "HEALTHCHECKS_HTTP_ALLOWED_ORIGINS",
    "HEALTHCHECKS_HTTP_PUBLIC_URL",
)


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def ignored_lines(env: Mapping[str, str], *, http: bool, demo: bool) -> list[str]:
    """One start-up line per reason a set variable does nothing in this run (the values are
    never shown). Within a run that uses the instance, network.py's notes cover the proxy
    variables curl ignores."""
    lines = []
    unused = [name for name in INSTANCE_VARIABLES if name in env]
    if demo and unused:
        lines.append(
            f"hcmcp: --demo uses its built-in simulated instance, so {_names(unused)} "
            f"{'is' if len(unused) == 1 else 'are'} ignored."
        )
    if env.get("ELICITATION") == "false" and "HEALTHCHECKS_ELICITATION_TIMEOUT" in env:
        lines.append(
            "hcmcp: HEALTHCHECKS_ELICITATION_TIMEOUT is ignored: ELICITATION=false shows "
            "no dialog to time out."
        )
    http_only = [name for name in HTTP_ONLY_VARIABLES if name in env]
    if not http and http_only:
        lines.append(
            f"hcmcp: {_names(http_only)} {'is' if len(http_only) == 1 else 'are'} ignored: "
            f"{'it applies' if len(http_only) == 1 else 'they apply'} only with --http."
        )
    return lines


API_KEY_LENGTH = 32


def api_key_warning(key: str | None) -> str | None:
    """One line for a HEALTHCHECKS_API_KEY that cannot be a Healthchecks key, else None.

    Healthchecks keys are 32 printable ASCII characters: hcw_ + 28 (read-write), hcr_ + 28
    (read-only), or 32 without a prefix (older keys). Any other length is refused by the server
    with 401 "missing api key". The line describes the value; it never contains any of it.
    """
    if key is None:
        return None
    problems = []
    if len(key) != API_KEY_LENGTH:
        problems.append(f"it has {len(key)} characters, not {API_KEY_LENGTH}")
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        problems.append("it is wrapped in quotes; remove them")
    odd = sum(1 for char in key if not ("!" <= char <= "~"))
    if odd:
        problems.append(
            f"{odd} of its characters {'is' if odd == 1 else 'are'} not printable ASCII "
            "(a space, a control character or a non-ASCII letter)"
        )
    if not problems:
        return None
    return (
        "hcmcp: warning: HEALTHCHECKS_API_KEY does not look like a Healthchecks API key: "
        f"{'; '.join(problems)}. A key is {API_KEY_LENGTH} printable characters, e.g. hcw_ + 28 "
        "(read-write) or hcr_ + 28 (read-only); copy it again from Project Settings > API Access. "
        "Healthchecks will refuse this one with 401."
    )


KEY_SOURCES = ("env", "request", "request-or-env", "oauth")


def parse_key_source(raw: str | None) -> str:
    if raw is None:
        return "env"
    if raw not in KEY_SOURCES:
        raise ConfigError(
            f"HEALTHCHECKS_KEY_SOURCE={raw!r} is not a valid value: use exactly env (the default: "
            "HEALTHCHECKS_API_KEY serves every request), request (each HTTP request sends its "
            "caller's key in X-Healthchecks-Api-Key) or request-or-env (the caller's key when "
            "sent, else HEALTHCHECKS_API_KEY) or oauth (each person signs in with their own key "
            "through OAuth; see docs/oauth.md)"
        )
    return raw


def parse_public_url(raw: str | None) -> str | None:
    """HEALTHCHECKS_HTTP_PUBLIC_URL: the origin clients reach this server at, https://host[:port]
    (http only on a loopback host); no path."""
    name = "HEALTHCHECKS_HTTP_PUBLIC_URL"
    if raw is None:
        return None
    entry = raw.strip().rstrip("/")
    problem = _origin_problem(entry)
    if problem is None:
        scheme, _, rest = entry.partition("://")
        host = rest.rsplit(":", 1)[0] if not rest.endswith("]") else rest
        host = host.strip("[]").lower()
        if scheme.lower() != "https" and host not in ("127.0.0.1", "::1", "localhost"):
            problem = (
                "is not https; OAuth tokens and keys must travel over TLS (http only on loopback)"
            )
    if problem:
        raise ConfigError(
            f"{name}={entry[:80]!r} {problem}. Give the public origin of this server, "
            "scheme://host[:port] with nothing after it, e.g. https://mcp.example.com"
        )
    return entry.lower()


def _oauth_problem(env: Mapping[str, str], key_source: str) -> str | None:
    if key_source != "oauth":
        return None
    if env.get("HEALTHCHECKS_STATE_KEY") is None:
        return (
            "HEALTHCHECKS_KEY_SOURCE=oauth needs HEALTHCHECKS_STATE_KEY: tokens are sealed with "
            "it (replicas must share it). Generate one with: "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    if env.get("HEALTHCHECKS_HTTP_TOKEN") is not None:
        return (
            "HEALTHCHECKS_KEY_SOURCE=oauth and HEALTHCHECKS_HTTP_TOKEN cannot be combined: "
            "Authorization carries each person's access token; unset HEALTHCHECKS_HTTP_TOKEN"
        )
    return None


def load(env: Mapping[str, str]) -> Config:
    state_key = None
    if env.get("HEALTHCHECKS_STATE_KEY") is not None:
        try:
            state_key = parse_state_key(env["HEALTHCHECKS_STATE_KEY"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    api_key = env.get("HEALTHCHECKS_API_KEY", "").strip() or None
    token = env.get("HEALTHCHECKS_HTTP_TOKEN")
    if token is not None and len(token.strip()) < 16:
        raise ConfigError(
            "HEALTHCHECKS_HTTP_TOKEN must be at least 16 characters; generate one with: "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    origins = parse_origins(env.get("HEALTHCHECKS_HTTP_ALLOWED_ORIGINS"))
    key_source = parse_key_source(env.get("HEALTHCHECKS_KEY_SOURCE"))
    problem = _oauth_problem(env, key_source)
    if problem is not None:
        raise ConfigError(problem)
    public_url = parse_public_url(env.get("HEALTHCHECKS_HTTP_PUBLIC_URL"))
    site_root = parse_site_root(env.get("HEALTHCHECKS_URL"))
    from .network import network_settings

    network = network_settings(env, site_root)
    return Config(
        api_key=api_key,
        site_root=site_root,
        read_only=parse_bool("HEALTHCHECKS_READ_ONLY", env.get("HEALTHCHECKS_READ_ONLY"), False),
        allow_tools=parse_list("HEALTHCHECKS_ALLOW_TOOLS", env.get("HEALTHCHECKS_ALLOW_TOOLS")),
        deny_tools=parse_list("HEALTHCHECKS_DENY_TOOLS", env.get("HEALTHCHECKS_DENY_TOOLS")),
        elicitation=parse_bool("ELICITATION", env.get("ELICITATION"), True),
        elicitation_timeout=parse_seconds(
            "HEALTHCHECKS_ELICITATION_TIMEOUT", env.get("HEALTHCHECKS_ELICITATION_TIMEOUT"), 120.0
        ),
        state_key=state_key,
        request_timeout=parse_seconds(
            "HEALTHCHECKS_TIMEOUT", env.get("HEALTHCHECKS_TIMEOUT"), 15.0
        ),
        max_response_bytes=parse_bytes(
            "HEALTHCHECKS_MAX_RESPONSE_BYTES",
            env.get("HEALTHCHECKS_MAX_RESPONSE_BYTES"),
            5 * 1024 * 1024,
        ),
        http_token=token.strip() if token is not None else None,
        http_allowed_origins=origins,
        key_source=key_source,
        http_public_url=public_url,
        metrics=parse_bool("HCMCP_METRICS", env.get("HCMCP_METRICS"), False),
        log_format=parse_choice(
            "HCMCP_LOG_FORMAT", env.get("HCMCP_LOG_FORMAT"), LOG_FORMATS, "text"
        ),
        log_level=parse_choice(
            "HCMCP_LOG_LEVEL", env.get("HCMCP_LOG_LEVEL"), LOG_LEVELS, "warning"
        ),
        result_budget=parse_result_budget(env.get("HCMCP_RESULT_BUDGET")),
        **network,
    )
