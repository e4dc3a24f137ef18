"""What the stdio and HTTP fast paths share: the warm-up thread, the signal wakeup pipe, a raw exit.

Standard library C pieces only (``_signal``, not ``signal``: that imports enum).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Callable
    from threading import Thread
    from typing import Generic, TypeVar

    T = TypeVar("T")
else:  # typing.Generic without importing typing: Warmer[...] is Warmer itself at run time
    T = None

    class Generic:
        def __class_getitem__(cls, item: object) -> type:
            return cls


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def exit_now(code: int = 0) -> None:
    """As protocol.stdio.exit_now, without importing it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


class Warmer(Generic[T]):
    """Runs ``build`` in a background thread; ``result()`` waits for it (or runs it here)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._thread: Thread | None = None
        self._value: list[T] = []  # the one result, once _run has it
        self._error: BaseException | None = None
        self._interval = 0.0

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        import threading

        # Hand the interpreter back to the main thread quickly while we import: it has replies
        # to write.
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        self._thread = threading.Thread(target=self._run, name="hcmcp-warm-up", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value.append(self._build())
        except BaseException as error:  # noqa: BLE001 -- re-raised on the main thread
            self._error = error

    def result(self) -> T:
        if self._thread is None:
            return self._build()
        self._thread.join()
        sys.setswitchinterval(self._interval)
        if self._error is not None:
            raise self._error
        return self._value[0]


def wakeup_pipe() -> tuple[int, int] | None:
    """(read, write) ends of a pipe signal.set_wakeup_fd writes to; None off the main thread, and
    where a wait cannot watch such a pipe (hcmcp/portable.py: the waits wake on a timer there)."""
    from ..portable import SIGNAL_WAKEUP

    if not SIGNAL_WAKEUP:
        return None
    import _signal  # not signal: that imports enum (milliseconds of start-up)

    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_read, False)
    os.set_blocking(wakeup_write, False)
    try:
        _signal.set_wakeup_fd(wakeup_write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread (an in-process test): no handler could run here anyway
        os.close(wakeup_read)
        os.close(wakeup_write)
        return None
    return wakeup_read, wakeup_write


def close_wakeup_pipe(pipe: tuple[int, int] | None) -> None:
    if pipe is not None:
        import _signal

        _signal.set_wakeup_fd(-1)  # the full path sets its own (run_stdio, or the event loop)
        os.close(pipe[0])
        os.close(pipe[1])
