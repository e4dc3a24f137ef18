"""The standard ``process_*`` series (as Prometheus' client libraries name them), from /proc/self.

Linux only: where /proc is missing, the series are left out rather than made up.
"""

from __future__ import annotations

import os

_TICKS: float | None = None
_PAGE = 0
_BOOT: float | None = None


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def collect() -> list[str]:
    """The exposition lines (HELP, TYPE, value) of every process series this system offers."""
    global _TICKS, _PAGE, _BOOT
    try:
        with open("/proc/self/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return []
    if _TICKS is None:
        _TICKS = float(os.sysconf("SC_CLK_TCK"))
        _PAGE = os.sysconf("SC_PAGE_SIZE")
        _BOOT = _boot_time()
    # The command name is in parentheses and may hold spaces: the fields follow the last ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    start_ticks = int(fields[19])
    vsize, rss_pages = int(fields[20]), int(fields[21])
    series: list[tuple[str, str, str, float]] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (utime + stime) / _TICKS,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            float(rss_pages * _PAGE),
        ),
        ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", float(vsize)),
    ]
    if _BOOT is not None:
        series.append(
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                _BOOT + start_ticks / _TICKS,
            )
        )
    try:
        series.append(
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                float(len(os.listdir("/proc/self/fd"))),
            )
        )
    except OSError:
        pass
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            series.append(
                (
                    "process_max_fds",
                    "gauge",
                    "Maximum number of open file descriptors.",
                    float(soft),
                )
            )
    except (ImportError, OSError, ValueError):
        pass
    out: list[str] = []
    for name, kind, help, value in series:
        shown = str(int(value)) if value == int(value) else repr(value)
        out += [f"# HELP {name} {help}", f"# TYPE {name} {kind}", f"{name} {shown}"]
    return out
