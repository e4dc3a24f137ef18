"""Waiting for one descriptor in place, without an event-loop turn, when the loop has nothing else to do.

A task that awaits a socket on asyncio costs one trip through the loop per wait: register the
reader, create a future, suspend, ``epoll_wait``, run the reader callback, set the future, schedule
the task, run one more loop iteration to resume it. On a machine whose idle CPUs come back cold,
that trip cost ~40-90 us per wait, more than the rest of a stdio ``get_check`` against a fast
upstream (benchmarks/RESULTS.md, "the per-call overhead").

When the loop has no runnable callback, everything that can happen next is one of: a registered
descriptor becomes ready, a timer comes due, or the loop's self-pipe is written (a signal, or
``call_soon_threadsafe`` from a worker thread). ``wait_readable_here`` polls exactly those, plus the
descriptor the task wants, with the loop's own timeout (the earliest live timer), right where the
task is. If the task's descriptor is the only one ready, the task goes on without having suspended:
what the loop would have done, minus the trip. Anything else -- another descriptor ready, the self-pipe,
a timer due, a busy loop, a loop that is not asyncio's selector loop, too many registrations to poll
cheaply, no ``select.poll`` at all (Windows, hcmcp/portable.py) -- returns False and the caller
awaits the loop as usual, which then finds the same readiness at once. So it can only make a wait cheaper, never change what happens or in which order: no other
task could have run meanwhile, because none was runnable.

The same state says when a task that serves one client after another must let others go first:
``others_waiting`` is True when a callback is runnable, a timer due, or a watched descriptor ready
(a poll that does not wait), and ``take_turn_if_others_wait`` then gives the loop one turn. The HTTP
request loop asks it before each next request of a keep-alive connection (issue 34): a client whose
next request was already there when its answer went out was otherwise served again ahead of
clients whose requests had arrived first. A lone client pays a poll, not a loop turn.

It reads the selector loop's private state (``_ready``, ``_scheduled``, ``_selector._fd_to_key``) with getattr; if
a Python version renames them, every wait simply goes through the loop again
(tests/test_idle_wait.py checks that the fast path is taken on this interpreter).
"""

from __future__ import annotations

import math
import select
import types
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ..portable import POLL

_MAX_REGISTERED = 16  # descriptors the loop watches: more and a poll set costs more than the trip
_MAX_TIMERS = (
    128  # scanned for the earliest live one; more and the loop (which prunes them) goes first
)
# poll's flags (none where there is no poll: Windows, where every wait goes through the loop)
_READABLE = (
    select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
    if POLL
    else 0
)
_EVENT_READ, _EVENT_WRITE = 1, 2  # selectors.EVENT_READ / EVENT_WRITE (not imported: start-up)

# A reader whose task is busy running what it read (protocol/stdio.py runs a request on the task
# that read it; http/server/connection.py runs an app on its request loop): its descriptor, which nobody
# watches meanwhile, and whether it already holds input in memory. A wait in place watches that
# descriptor too (input there is work for the loop), and does not happen at all while input waits
# in memory: that is work too.
unattended: ContextVar[tuple[int, Callable[[], bool]] | None] = ContextVar(
    "hcmcp_unattended", default=None
)


def _runnable(ready: Any) -> bool:
    """Whether the loop's ready queue holds a callback that will run: a handle cancelled after it
    was queued (a reader removed once the selector had reported its descriptor, as when an
    answer's watch ends, http/server/connection.py) is dropped by the loop unrun, and is no work."""
    try:
        for handle in ready:
            if not handle._cancelled:
                return True
    except AttributeError:  # not asyncio's Handle: another loop, or another Python
        return True
    return False


def wait_readable_here(loop: Any, fd: int) -> bool:
    """True once ``fd`` is readable (data, EOF or an error), waited for in place; False when the
    caller must await the loop instead (see the module text). Never raises for the loop's sake."""
    if not POLL:
        return False
    ready = getattr(loop, "_ready", None)
    scheduled = getattr(loop, "_scheduled", None)
    selector = getattr(loop, "_selector", None)
    if (
        ready is None
        or scheduled is None
        or selector is None
        or _runnable(ready)
        or len(scheduled) > _MAX_TIMERS
    ):
        return False
    # fd -> SelectorKey (get_map() is a slow view of it)
    registered = getattr(selector, "_fd_to_key", None)
    if not isinstance(registered, dict) or len(registered) > _MAX_REGISTERED or fd in registered:
        return False
    reader = unattended.get()
    if reader is not None and reader[1]():
        return False
    timeout = -1  # poll's "no timeout": no timer at all, as the loop would wait
    try:
        live = [handle._when for handle in scheduled if not handle._cancelled]
    except AttributeError:  # a TimerHandle without them: another loop, or another Python
        return False
    if live:
        remaining = min(live) - loop.time()
        if remaining <= 0:
            return False
        # the loop caps its own wait at a day too
        timeout = math.ceil(min(remaining, 86400.0) * 1000)
    poller = select.poll()
    try:
        poller.register(fd, select.POLLIN | select.POLLPRI)
        if reader is not None and reader[0] != fd:
            poller.register(reader[0], select.POLLIN | select.POLLPRI)
        for key in registered.values():
            mask = (select.POLLIN if key.events & _EVENT_READ else 0) | (
                select.POLLOUT if key.events & _EVENT_WRITE else 0
            )
            poller.register(key.fd, mask)
        events = poller.poll(timeout)
    except (OSError, ValueError):
        return False
    return len(events) == 1 and events[0][0] == fd and bool(events[0][1] & _READABLE)


def others_waiting(loop: Any) -> bool:
    """True when something other than the caller could run now: a runnable callback, a timer due,
    or a descriptor the loop watches that is ready (polled without waiting); True too for a loop
    whose state cannot be read here. A task that serves one client after another without ever
    awaiting the loop (each next request already buffered, every wait done in place) asks this at
    each turn, and gives the loop a turn when it is True: only then, so a lone client pays a poll,
    not the loop's trip."""
    ready = getattr(loop, "_ready", None)
    scheduled = getattr(loop, "_scheduled", None)
    selector = getattr(loop, "_selector", None)
    if ready is None or scheduled is None or selector is None or _runnable(ready):
        return True
    try:
        if scheduled and scheduled[0]._when <= loop.time():  # a heap: the earliest first
            return True
        return bool(selector.select(0))  # level-triggered: polling consumes nothing
    except (AttributeError, OSError, ValueError):
        return True


@types.coroutine
def _one_loop_turn() -> Any:
    yield  # what asyncio.sleep(0) does, without importing asyncio here


async def take_turn_if_others_wait(loop: Any) -> None:
    """Give the loop one turn (the tasks and callbacks ready now run before the caller goes on)
    if ``others_waiting``; return at once otherwise."""
    if others_waiting(loop):
        await _one_loop_turn()


@types.coroutine
def suspends_once(coroutine: Any, on_suspend: Any) -> Any:
    """``await coroutine``, calling ``on_suspend()`` once, when it first suspends.

    The coroutine stays on this task (so its cancel scopes stay where they were entered); what
    it yields to the event loop, and what the loop sends or throws back, pass through unchanged.
    """
    try:
        yielded = coroutine.send(None)
    except StopIteration as done:
        return done.value
    on_suspend()
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - whatever is thrown in goes on to the coroutine
            try:
                yielded = coroutine.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coroutine.send(sent)
            except StopIteration as done:
                return done.value
