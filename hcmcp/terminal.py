"""``hcmcp call``'s dialog at the terminal: the question the guard asks, answered by the person.

The guard's own message names checks by UUID only (to a model's client, a check's name is free text
this server does not control). A person at a terminal needs to see which check it is, so each one
is looked up and shown beside its UUID: name, tags, status, last ping, with every control or
format character of the instance's text escaped (no escape sequence reaches the terminal). The
answer is read from stdin without a thread: Ctrl-C ends the process at once (``__main__``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .healthchecks.api import HealthchecksApi
    from .healthchecks.models import Check

SHOWN_CHARACTERS = 60  # of a name, and of the tags together


def shown(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """The instance's text, safe on a terminal: controls, format characters (bidi overrides,
    zero-width) and unassigned code points as \\u escapes; cut at ``limit`` characters."""
    import unicodedata

    cut = len(text) > limit
    out = []
    for char in text[:limit]:
        if unicodedata.category(char)[0] in "CZ" and char != " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out) + ("…" if cut else "")


def targets_of(arguments: Any) -> list[str]:
    """delete_check's targets as the tool reads them (sorted, lowercase, de-duplicated)."""
    from .healthchecks.api import normalise_uuid

    given = arguments.get("check") if isinstance(arguments, dict) else None
    values = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    return sorted({normalise_uuid(value) or value for value in values if isinstance(value, str)})


def describe(uuid: str, check: Check | None, failure: str | None) -> str:
    if check is None:
        return f"  {uuid}  (could not be looked up: {failure})"
    tags = shown(check.tags) if check.tags.strip() else "none"
    last = shown(check.last_ping, 40) if check.last_ping else "never"
    name = f'"{shown(check.name)}"' if check.name else "(no name)"
    return (
        f"  {uuid}  {name}\n      tags: {tags}   status: "
        f"{shown(check.status, 20)}   last ping: {last}"
    )


async def details(api: HealthchecksApi | None, targets: list[str]) -> list[str]:
    """One description per target, looked up side by side (what cannot be, says why)."""
    import anyio

    found: dict[str, tuple[Check | None, str | None]] = {}

    async def look_up(uuid: str) -> None:
        if api is None:
            found[uuid] = (None, "no API to ask")
            return
        try:
            found[uuid] = (await api.get_check(uuid), None)
        except Exception as error:  # noqa: BLE001 -- any failure is shown; the delete reports its own
            found[uuid] = (None, shown(str(error), 200) or error.__class__.__name__)

    async with anyio.create_task_group() as group:
        for uuid in targets:
            group.start_soon(look_up, uuid)
    return [describe(uuid, *found[uuid]) for uuid in targets]


async def read_reply() -> str:
    """One line from stdin (a terminal: the line the person typed; "" at end of input). Where stdin
    cannot be waited on (Windows: hcmcp/portable.py), a worker thread reads it."""
    import anyio

    from .portable import POLL

    data = b""
    while not data.endswith(b"\n"):
        if POLL:
            await anyio.wait_readable(0)
            chunk = os.read(0, 4096)
        else:
            chunk = await anyio.to_thread.run_sync(os.read, 0, 4096, abandon_on_cancel=True)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


async def ask_at_terminal(
    request: dict[str, Any], api: HealthchecksApi | None, arguments: Any
) -> dict[str, Any]:
    """The answer to an elicitation/create request, asked of the person on stderr/stdin."""
    from .tools.confirm import COST

    params = request.get("params", {})
    targets = targets_of(arguments)
    if targets:  # delete_check's question, with each check named (the guard's names UUIDs only)
        what = "check" if len(targets) == 1 else f"{len(targets)} checks"
        out = ["", f"This will delete {what}:", *await details(api, targets), "", COST]
    else:
        out = ["", str(params.get("message", ""))]
    sys.stderr.write("\n".join(out) + "\n")
    content: dict[str, Any] = {}
    for field, schema in params.get("requestedSchema", {}).get("properties", {}).items():
        if schema.get("type") == "boolean":
            label = schema.get("title") or field
            # The prompt goes to stderr (input() would write it to stdout: the result's).
            sys.stderr.write(
                f"{label}? Type yes to delete (anything else, y too, deletes nothing): "
            )
            sys.stderr.flush()
            content[field] = (await read_reply()).strip().lower() == "yes"
    if content and all(content.values()):
        return {"action": "accept", "content": content}
    return {"action": "decline"}
