"""The error every setting raises and the strict parsers of single values (a boolean, the state
key): the leaf both config modules import (config/settings.py for the whole environment,
config/network.py for how the instance is reached). Nothing here imports anything: it is on the
start-up path."""

from __future__ import annotations


class ConfigError(Exception):
    """A setting that cannot be used; the message says which and how to fix it."""


def parse_bool(name: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    if raw == "true":
        return True
    if raw == "false":
        return False
    raise ConfigError(
        f"{name}={raw!r} is not a valid value: use exactly true or false "
        f"(the default is {'true' if default else 'false'})"
    )


def parse_state_key(text: str) -> bytes:
    """HEALTHCHECKS_STATE_KEY: at least 32 bytes, given as hex or base64. ValueError says what is wrong."""
    import base64

    raw = text.strip()
    key: bytes | None = None
    if raw and all(c in "0123456789abcdefABCDEF" for c in raw) and len(raw) % 2 == 0:
        key = bytes.fromhex(raw)
    else:
        try:
            key = base64.b64decode(
                raw + "=" * (-len(raw) % 4),
                altchars=b"-_" if ("-" in raw or "_" in raw) else None,
                validate=True,
            )
        except (ValueError, TypeError):
            key = None
    if key is None:
        raise ValueError(
            "HEALTHCHECKS_STATE_KEY must be hex or base64 text; generate one with: "
            'python -c "import secrets; print(secrets.token_hex(32))"'
        )
    if len(key) < 32:
        raise ValueError(
            f"HEALTHCHECKS_STATE_KEY decodes to {len(key)} bytes; it needs at least 32. "
            'Generate one with: python -c "import secrets; print(secrets.token_hex(32))"'
        )
    return key
