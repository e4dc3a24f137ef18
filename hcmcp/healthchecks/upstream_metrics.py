"""The upstream series: how long each request to the instance took, by endpoint and status class.

The endpoint is the API path with its identifiers replaced (``checks/{id}/pings/``), drawn from
the fixed set of paths this client sends; anything else is ``other``. No UUID, slug or name
ever becomes a label.
"""

from __future__ import annotations

from ..telemetry.metrics import REQUEST_BUCKETS, Histogram, registry

_WORDS = frozenset(
    {"checks", "pings", "flips", "body", "pause", "resume", "channels", "badges", "status"}
)
ENDPOINTS = frozenset(
    {
        "checks/",
        "checks/{id}",
        "checks/{id}/pings/",
        "checks/{id}/pings/{n}/body",
        "checks/{id}/flips/",
        "checks/{id}/pause",
        "checks/{id}/resume",
        "channels/",
        "badges/",
        "status/",
    }
)
METHODS = frozenset({"GET", "POST", "DELETE"})


def endpoint(rel: str) -> str:
    """``checks/4f0c.../pings/`` -> ``checks/{id}/pings/``; unknown shapes -> ``other``."""
    parts = rel.split("/")
    shape = "/".join(
        part if part in _WORDS or part == "" else "{n}" if part.isdigit() else "{id}"
        for part in parts
    )
    return shape if shape in ENDPOINTS else "other"


def status_class(status: int | None) -> str:
    """``2xx`` ... ``5xx``; ``error`` when no answer came (timeout, refused connection, ...)."""
    if status is None or not 100 <= status <= 599:
        return "error"
    return f"{status // 100}xx"


class UpstreamMetrics:
    def __init__(self) -> None:
        metrics = registry()
        self.duration: Histogram | None = (
            metrics.histogram(
                "hcmcp_upstream_request_duration_seconds",
                "Requests to the Healthchecks instance, from sending to the whole answer, by "
                "method, endpoint and status class (error: no answer).",
                ("method", "endpoint", "status_class"),
                REQUEST_BUCKETS,
            )
            if metrics is not None
            else None
        )

    def observe(self, method: str, rel: str, status: int | None, seconds: float) -> None:
        if self.duration is not None:
            labels = (method if method in METHODS else "other", endpoint(rel), status_class(status))
            self.duration.observe(labels, seconds)
