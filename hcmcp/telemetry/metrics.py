"""Metrics: counters, gauges and histograms, and their Prometheus text exposition (0.0.4).

Written by hand (no client library): the exposition is a few lines per series. The owner of
an instrument names its label keys once; every label value it records must come from a fixed
set the owner chooses, so the number of series is bounded by construction (``bounded()`` maps
anything else to ``"other"``). Nothing here knows what is measured.

The process has at most one ``Registry``: ``enable()`` makes it (the command does, when
metrics are switched on) and ``registry()`` returns it, or None when metrics are off, so an
owner that finds None records nothing and pays nothing.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from math import inf

# mcp.server.operation.duration's advisory bucket boundaries (OpenTelemetry MCP conventions), s.
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# For requests to another service: finer at the low end.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[str, ...]


def bounded(value: object, allowed: frozenset[str] | set[str], other: str = "other") -> str:
    """``value`` when it is one of ``allowed``, else ``other``: a label never takes a free value."""
    return value if isinstance(value, str) and value in allowed else other


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(value: str) -> str:
    # HELP text escapes backslash and line feed only (quotes stay as they are).
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if value == inf:
        return "+Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _label_text(keys: Labels, values: Labels, extra: str = "") -> str:
    pairs = [f'{key}="{_escape(value)}"' for key, value in zip(keys, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Instrument:
    kind = "untyped"

    def __init__(self, name: str, help: str, labels: Labels = ()) -> None:
        self.name = name
        self.help = help
        self.labels = labels

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Instrument):
    """A monotonic count per label values."""

    kind = "counter"

    def __init__(self, name: str, help: str, labels: Labels = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels = (), amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_label_text(self.labels, key)} {_number(value)}"
            for key, value in sorted(self.values.items())
        ]


class Gauge(_Instrument):
    """A value read when scraped: ``read()`` returns {label values: value}."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help: str,
        read: Callable[[], dict[Labels, float]],
        labels: Labels = (),
    ) -> None:
        super().__init__(name, help, labels)
        self.read = read

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_label_text(self.labels, key)} {_number(value)}"
            for key, value in sorted(self.read().items())
        ]


class Histogram(_Instrument):
    """Cumulative buckets, a sum and a count per label values."""

    kind = "histogram"

    def __init__(
        self, name: str, help: str, labels: Labels = (), buckets: Iterable[float] = REQUEST_BUCKETS
    ) -> None:
        super().__init__(name, help, labels)
        self.bounds = tuple(sorted(buckets))
        # label values -> [count per bucket (not cumulative; the last is +Inf), sum]
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, labels: Labels, value: float) -> None:
        entry = self.series.get(labels)
        if entry is None:
            entry = self.series[labels] = ([0] * (len(self.bounds) + 1), [0.0])
        counts, total = entry
        counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value (le is inclusive)
        total[0] += value

    def count(self, labels: Labels) -> int:
        entry = self.series.get(labels)
        return sum(entry[0]) if entry is not None else 0

    def lines(self) -> list[str]:
        out: list[str] = []
        for key, (counts, total) in sorted(self.series.items()):
            running = 0
            for bound, count in zip((*self.bounds, inf), counts, strict=True):
                running += count
                le = f'le="{_number(bound)}"'
                out.append(f"{self.name}_bucket{_label_text(self.labels, key, le)} {running}")
            out.append(f"{self.name}_sum{_label_text(self.labels, key)} {_number(total[0])}")
            out.append(f"{self.name}_count{_label_text(self.labels, key)} {running}")
        return out


class Registry:
    """The instruments of this process, in registration order, and extra collectors."""

    def __init__(self) -> None:
        self.instruments: dict[str, _Instrument] = {}
        self.collectors: list[Callable[[], list[str]]] = []

    def _add(self, instrument: _Instrument) -> _Instrument:
        existing = self.instruments.get(instrument.name)
        if existing is not None:
            if type(existing) is not type(instrument) or existing.labels != instrument.labels:
                raise ValueError(f"metric {instrument.name} registered twice, differently")
            return existing
        self.instruments[instrument.name] = instrument
        return instrument

    def counter(self, name: str, help: str, labels: Labels = ()) -> Counter:
        made = self._add(Counter(name, help, labels))
        assert isinstance(made, Counter)
        return made

    def histogram(
        self, name: str, help: str, labels: Labels = (), buckets: Iterable[float] = REQUEST_BUCKETS
    ) -> Histogram:
        made = self._add(Histogram(name, help, labels, buckets))
        assert isinstance(made, Histogram)
        return made

    def gauge(
        self,
        name: str,
        help: str,
        read: Callable[[], dict[Labels, float]],
        labels: Labels = (),
    ) -> Gauge:
        """A gauge read at scrape time; registering the same name again replaces how it is read
        (a new listener in the same process reads its own state)."""
        gauge = Gauge(name, help, read, labels)
        existing = self.instruments.get(name)
        if isinstance(existing, Gauge) and existing.labels == labels:
            existing.read = read
            return existing
        made = self._add(gauge)
        assert isinstance(made, Gauge)
        return made

    def render(self) -> bytes:
        """Every series in the text exposition format 0.0.4 (``CONTENT_TYPE``)."""
        out: list[str] = []
        for collect in self.collectors:
            out.extend(collect())
        for instrument in self.instruments.values():
            out.extend(instrument.header())
            out.extend(instrument.lines())
        return ("\n".join(out) + "\n").encode()


_REGISTRY: Registry | None = None


def enable() -> Registry:
    """Switch metrics on for this process (idempotent); returns its registry."""
    global _REGISTRY
    if _REGISTRY is None:
        from .process import collect

        _REGISTRY = Registry()
        _REGISTRY.collectors.append(collect)
    return _REGISTRY


def disable() -> None:
    """Switch metrics off again (tests that build servers in one process)."""
    global _REGISTRY
    _REGISTRY = None


def registry() -> Registry | None:
    """The process's registry, or None when metrics are off."""
    return _REGISTRY
