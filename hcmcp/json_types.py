"""The JSON value types every layer shares: what a JSON decoder returns and an encoder takes.

Written for the type checker only. At run time the names are ``object`` and
``dict[str, object]``, which msgspec decodes exactly as it did ``Any`` (no check of the values,
no extra work per message), so a Struct field typed ``JsonValue`` costs what an untyped one did.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TypeAlias

    # Nested arrays and objects are read-only views (covariant): a list[str] or a dict[str, int]
    # is a JSON value as it stands, without a copy or a cast.
    JsonValue: TypeAlias = (
        bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
    )
    # A JSON object at hand (decoded from JSON, or being built to be encoded): a dict to change.
    JsonObject: TypeAlias = dict[str, JsonValue]
else:
    JsonValue = object
    JsonObject = dict[str, object]
