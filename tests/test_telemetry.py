"""hcmcp.telemetry's generic pieces: the exposition format, bounded labels, the upstream endpoint
shapes, the process series, the log line formats."""

from __future__ import annotations

import json
import os

from hcmcp.healthchecks.upstream_metrics import endpoint, status_class
from hcmcp.telemetry import logs
from hcmcp.telemetry.metrics import Registry, bounded
from hcmcp.telemetry.process import collect


def test_histogram_buckets_are_cumulative_with_sum_and_count():
    registry = Registry()
    histogram = registry.histogram("x_seconds", "X.", ("kind",), (0.1, 1.0))
    for value in (0.05, 0.5, 0.5, 3.0):
        histogram.observe(("a",), value)
    lines = registry.render().decode().splitlines()
    assert lines[:2] == ["# HELP x_seconds X.", "# TYPE x_seconds histogram"]
    assert lines[2:] == [
        'x_seconds_bucket{kind="a",le="0.1"} 1',
        'x_seconds_bucket{kind="a",le="1"} 3',
        'x_seconds_bucket{kind="a",le="+Inf"} 4',
        'x_seconds_sum{kind="a"} 4.05',
        'x_seconds_count{kind="a"} 4',
    ]


def test_label_values_are_escaped_and_bounded():
    registry = Registry()
    counter = registry.counter("y_total", 'Help with "quotes" and \\.', ("what",))
    counter.inc(('a"b\\c\nd',))
    counter.inc((bounded("anything a client sends", {"known"}),))
    text = registry.render().decode()
    assert 'y_total{what="a\\"b\\\\c\\nd"} 1' in text and 'y_total{what="other"} 1' in text
    assert '# HELP y_total Help with "quotes" and \\\\.' in text


def test_registering_a_name_twice_differently_is_refused():
    registry = Registry()
    registry.counter("z_total", "Z.", ("a",))
    assert registry.counter("z_total", "Z.", ("a",)) is registry.instruments["z_total"]
    try:
        registry.counter("z_total", "Z.", ("b",))
    except ValueError as error:
        assert "z_total" in str(error)
    else:
        raise AssertionError("accepted")


def test_upstream_endpoints_never_carry_an_identifier():
    uuid = "4f0c7a9e-1111-4000-8000-000000000001"
    assert endpoint("checks/") == "checks/"
    assert endpoint(f"checks/{uuid}") == "checks/{id}"
    assert endpoint(f"checks/{uuid}/pings/12/body") == "checks/{id}/pings/{n}/body"
    assert endpoint(f"checks/{uuid}/pause") == "checks/{id}/pause"
    assert endpoint("checks/my-slug/anything") == "other"
    assert [status_class(s) for s in (200, 404, 503, None)] == ["2xx", "4xx", "5xx", "error"]


def test_process_series_come_from_proc():
    lines = collect()
    values = {line.split()[0]: float(line.split()[1]) for line in lines if not line.startswith("#")}
    assert values["process_open_fds"] >= 3 and values["process_resident_memory_bytes"] > 1e6
    assert values["process_start_time_seconds"] > 1.6e9
    assert values["process_cpu_seconds_total"] > 0
    assert os.path.exists("/proc/self/stat")


def test_log_lines_in_both_formats():
    try:
        logs.configure("json", "info")
        line = logs.format_line(
            "info", "request", None, {"tool": "get_check", "outcome": "ok", "upstream": None}
        )
        record = json.loads(line)
        assert (
            record["event"] == "request"
            and record["tool"] == "get_check"
            and "upstream" not in record
        )
        assert set(record) == {"time", "level", "event", "tool", "outcome"}
        logs.configure("text", "warning")
        assert not logs.enabled("info")
        assert logs.format_line(
            "info", "audit", None, {"checks": ["a", "b"], "client_name": "My Client"}
        ) == ("hcmcp: INFO audit: checks=a,b client_name='My Client'")
    finally:
        logs.configure("text", "warning")
