"""Which tools load (HEALTHCHECKS_ALLOW_TOOLS / HEALTHCHECKS_DENY_TOOLS / essential / read-only).

Apart from catalog.py so that the start-up fast path (hcmcp/fast_start/) can apply the very
same selection to the tool names and tags it has precomputed, without importing the tools.
A "tool" here is anything with ``name`` and ``tags``.
"""

from __future__ import annotations

from ..config.parse import ConfigError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Protocol, TypeVar

    from ..config.settings import Config

    class Selectable(Protocol):
        """What the selection reads of a tool: a Tool, or fast_start's precomputed entry."""

        @property
        def name(self) -> str: ...
        @property
        def tags(self) -> frozenset[str]: ...

    T = TypeVar("T", bound=Selectable)

ESSENTIAL = "essential"


def _matches(entry: str, tool: Selectable) -> bool:
    if entry == ESSENTIAL:
        return ESSENTIAL in tool.tags
    if entry.endswith("*"):
        return tool.name.startswith(entry[:-1])
    return tool.name == entry


def select(read: list[T], write: list[T], config: Config) -> list[T]:
    everything = read + write
    names = ", ".join(tool.name for tool in everything)
    for variable, entries in (
        ("HEALTHCHECKS_ALLOW_TOOLS", config.allow_tools),
        ("HEALTHCHECKS_DENY_TOOLS", config.deny_tools),
    ):
        for entry in entries or ():
            if not any(_matches(entry, tool) for tool in everything):
                raise ConfigError(
                    f"{variable}: {entry!r} matches no tool. Valid entries are tool names, "
                    f"a prefix ending in * (e.g. list_*), or {ESSENTIAL}. Tools: {names}"
                )
    chosen = read if config.read_only else everything
    if config.allow_tools is not None:
        chosen = [t for t in chosen if any(_matches(e, t) for e in config.allow_tools)]
    if config.deny_tools is not None:
        chosen = [t for t in chosen if not any(_matches(e, t) for e in config.deny_tools)]
    if not chosen:
        why = " (HEALTHCHECKS_READ_ONLY=true removes the write tools)" if config.read_only else ""
        raise ConfigError(
            f"The tool selection leaves no tool to serve{why}. Adjust HEALTHCHECKS_ALLOW_TOOLS / "
            f"HEALTHCHECKS_DENY_TOOLS; tools: {names}"
        )
    return chosen
