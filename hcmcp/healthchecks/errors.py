"""The typed errors of the Healthchecks API layer: what happened, what to do, the instance's words.

Re-exported by ``api``; each carries ``kind`` and ``retryable`` for the tool layer.
"""

from __future__ import annotations


class ApiError(Exception):
    """A request that did not give the answer asked for.

    ``message`` says what happened and why, ``advice`` what to do, ``upstream`` is the
    instance's own words (JSON ``error`` or text, cut to 2000 characters, HTML dropped,
    the key scrubbed) — kept apart so the tool layer can clean and quote it.
    None of the three ever contains the API key.
    """

    kind = "api_error"
    retryable = False

    def __init__(
        self, status: int | None, message: str, *, advice: str = "", upstream: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.advice = advice
        self.upstream = upstream

    def __str__(self) -> str:
        return " ".join(part for part in (self.message, self.advice) if part)


class MissingApiKey(ApiError):
    kind = "missing_api_key"


class InvalidIdentifier(ApiError):
    kind = "invalid_identifier"


class Unauthorized(ApiError):
    kind = "unauthorized"

    def __init__(
        self,
        status: int | None,
        message: str,
        *,
        read_only_key: bool = False,
        advice: str = "",
        upstream: str | None = None,
    ) -> None:
        super().__init__(status, message, advice=advice, upstream=upstream)
        self.read_only_key = read_only_key


class Forbidden(ApiError):
    kind = "forbidden"


class NotFound(ApiError):
    kind = "not_found"


class Conflict(ApiError):
    kind = "conflict"


class BadRequest(ApiError):
    kind = "bad_request"


class MethodNotAllowed(ApiError):
    kind = "method_not_allowed"


class Unavailable(ApiError):
    kind = "unavailable"
    retryable = True


class Redirected(ApiError):
    kind = "redirected"

    def __init__(
        self,
        status: int | None,
        message: str,
        *,
        location: str | None = None,
        advice: str = "",
        upstream: str | None = None,
    ) -> None:
        super().__init__(status, message, advice=advice, upstream=upstream)
        self.location = location


class Unreachable(ApiError):
    kind = "unreachable"
    retryable = True


class ResponseTooLarge(ApiError):
    kind = "response_too_large"


class NotJson(ApiError):
    kind = "not_json"


class UnexpectedStatus(ApiError):
    kind = "unexpected_status"
