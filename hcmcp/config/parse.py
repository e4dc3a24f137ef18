"""The error every setting raises and the strict boolean parser: the leaf both config modules
import (config/settings.py for the whole environment, config/network.py for how the instance is reached).
Nothing here imports anything: it is on the start-up path."""

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
