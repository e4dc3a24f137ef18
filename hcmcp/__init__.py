"""hcmcp: an MCP server for Healthchecks, without an MCP SDK."""

from __future__ import annotations

import sys

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    import logging
    from typing import Any

# Set by the command (hcmcp/__main__.py): log to stderr in our format once logging is first used.
configure_logging_on_first_use = False
# Set by the command: HCMCP_LOG_FORMAT, and whether requests are measured or logged
# (HCMCP_METRICS, HCMCP_LOG_LEVEL=info/debug), so that a server built later makes its observer
# (protocol/request_observer.py).
log_format = "text"
observing = False


def stderr_line(text: str) -> None:
    """A line for the operator (the banner, start-up notes): as is, or in JSON mode one object."""
    if log_format == "json":
        from .telemetry.logs import plain

        plain(text)
    else:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class _LazyLogger:
    """A logging.Logger that imports logging on first use: most runs log nothing, and importing
    logging costs milliseconds of start-up."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._logger is None:
            import logging

            if configure_logging_on_first_use and not logging.getLogger().handlers:
                # (a non-default format or level was installed at start): our format, in which
                # nothing a client sends can start a line of its own (telemetry/logs.py)
                from .telemetry.logs import install_logging

                install_logging()
            self._logger = logging.getLogger(self._name)
        value = getattr(self._logger, attribute)
        if callable(value):
            setattr(self, attribute, value)  # kept: the next call finds it without this lookup
        return value


def get_logger(name: str) -> _LazyLogger:
    return _LazyLogger(name)
