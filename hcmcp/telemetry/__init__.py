"""Telemetry primitives with no knowledge of MCP or Healthchecks: the bottom layer beside http.

- ``metrics``: counters, gauges and histograms with label sets fixed by their owner, and the
  Prometheus text exposition (format 0.0.4), written by hand;
- ``process``: the standard ``process_*`` series, read from ``/proc/self``;
- ``logs``: one stderr line per event, as human text or one JSON object;
- ``trace``: the W3C trace context (``traceparent``/``tracestate``) of the request being served.

Every module here is imported only when its feature is used: nothing of it is on the start-up
path of a server that runs with the defaults (no metrics, text logs).
"""
