"""hcmcp/http/idle_wait.py: a wait in place happens only when the loop has nothing else to do, and
gives way (returns False, so the caller awaits the loop) to everything the loop would have run first:
a ready callback, another descriptor, a timer, a signal, a reader's unattended input."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time

import pytest

from hcmcp.http.idle_wait import (
    others_waiting,
    take_turn_if_others_wait,
    unattended,
    wait_readable_here,
)


def _later(seconds: float, action) -> None:
    threading.Timer(seconds, action).start()


def _run(coroutine_function):
    return asyncio.run(coroutine_function())


def test_it_waits_in_place_when_the_loop_is_idle_and_that_descriptor_comes_first():
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            _later(0.05, lambda: b.send(b"x"))
            started = time.monotonic()
            taken = wait_readable_here(loop, a.fileno())
            return taken, time.monotonic() - started

        taken, waited = _run(main)
        assert taken is True
        assert waited >= 0.04
        assert a.recv(10) == b"x"


def test_a_ready_callback_means_the_loop_goes_first():
    a, b = socket.socketpair()
    with a, b:
        b.send(b"x")

        async def main():
            loop = asyncio.get_running_loop()
            loop.call_soon(lambda: None)
            return wait_readable_here(loop, a.fileno())

        assert _run(main) is False


def test_a_callback_cancelled_after_it_was_queued_is_no_work():
    """A reader removed once the selector had reported its descriptor leaves a cancelled handle
    in the ready queue until the next loop turn (the HTTP server's watch of a client, ended after
    an answer). The loop drops it unrun: a wait in place still happens, and nothing waits.
    Counted as work, it sent every next wait of a lone client through the loop, for good."""
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            handle = loop.call_soon(lambda: None)
            handle.cancel()
            nothing_waits = not others_waiting(loop)
            _later(0.05, lambda: b.send(b"x"))
            return nothing_waits, wait_readable_here(loop, a.fileno())

        assert _run(main) == (True, True)


def test_another_ready_descriptor_means_the_loop_goes_first():
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    with a, b, c, d:

        async def main():
            loop = asyncio.get_running_loop()
            seen = []
            loop.add_reader(c.fileno(), lambda: seen.append(c.recv(10)))
            _later(0.05, lambda: d.send(b"other"))
            started = time.monotonic()
            taken = wait_readable_here(loop, a.fileno())
            waited = time.monotonic() - started
            await asyncio.sleep(0)  # the loop now runs the other descriptor's reader
            await asyncio.sleep(0)
            loop.remove_reader(c.fileno())
            return taken, waited, seen

        taken, waited, seen = _run(main)
        assert taken is False
        assert waited < 5
        assert seen == [b"other"]


def test_a_timer_coming_due_ends_the_wait():
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            fired = []
            loop.call_later(0.1, lambda: fired.append(True))
            started = time.monotonic()
            taken = wait_readable_here(loop, a.fileno())
            waited = time.monotonic() - started
            await asyncio.sleep(0.05)
            return taken, waited, fired

        taken, waited, fired = _run(main)
        assert taken is False
        assert 0.08 <= waited < 5
        assert fired == [True]


def test_cancelled_timers_do_not_end_the_wait_early():
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            loop.call_later(0.01, lambda: None).cancel()
            _later(0.1, lambda: b.send(b"x"))
            return wait_readable_here(loop, a.fileno())

        assert _run(main) is True


def test_a_signal_ends_the_wait_and_its_handler_runs():
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            got = asyncio.Event()
            loop.add_signal_handler(signal.SIGUSR1, got.set)
            try:
                _later(0.05, lambda: os.kill(os.getpid(), signal.SIGUSR1))
                started = time.monotonic()
                taken = wait_readable_here(loop, a.fileno())
                waited = time.monotonic() - started
                await asyncio.wait_for(got.wait(), 5)
            finally:
                loop.remove_signal_handler(signal.SIGUSR1)
            return taken, waited

        taken, waited = _run(main)
        assert taken is False
        assert waited < 5


def test_a_busy_reader_s_input_ends_the_wait_and_its_buffered_line_prevents_it():
    a, b = socket.socketpair()
    stdin_r, stdin_w = os.pipe()
    try:
        with a, b:

            async def main():
                loop = asyncio.get_running_loop()
                token = unattended.set((stdin_r, lambda: False))
                try:
                    _later(0.05, lambda: os.write(stdin_w, b"{}\n"))
                    started = time.monotonic()
                    on_input = wait_readable_here(loop, a.fileno())
                    waited = time.monotonic() - started
                finally:
                    unattended.reset(token)
                token = unattended.set((os.open(os.devnull, os.O_RDONLY), lambda: True))
                try:
                    b.send(b"x")
                    with_a_line = wait_readable_here(loop, a.fileno())
                finally:
                    os.close(unattended.get()[0])
                    unattended.reset(token)
                return on_input, waited, with_a_line

            on_input, waited, with_a_line = _run(main)
            assert on_input is False and waited < 5
            assert with_a_line is False
    finally:
        os.close(stdin_r)
        os.close(stdin_w)


def test_a_descriptor_the_loop_already_watches_is_left_to_the_loop():
    a, b = socket.socketpair()
    with a, b:
        b.send(b"x")

        async def main():
            loop = asyncio.get_running_loop()
            loop.add_reader(a.fileno(), lambda: None)
            try:
                return wait_readable_here(loop, a.fileno())
            finally:
                loop.remove_reader(a.fileno())

        assert _run(main) is False


@pytest.mark.parametrize("loop", [object(), None])
def test_anything_but_an_asyncio_selector_loop_goes_through_the_loop(loop):
    a, b = socket.socketpair()
    with a, b:
        b.send(b"x")
        assert wait_readable_here(loop, a.fileno()) is False


def test_others_waiting_sees_a_ready_callback_a_due_timer_and_a_ready_descriptor_and_nothing_else():
    """The fairness point of the HTTP request loop (issue 34): a turn is given exactly when
    something else could run now."""
    a, b = socket.socketpair()
    with a, b:

        async def main():
            loop = asyncio.get_running_loop()
            seen = {"idle": others_waiting(loop)}
            handle = loop.call_soon(lambda: None)
            seen["callback"] = others_waiting(loop)
            handle.cancel()
            await asyncio.sleep(0)  # the cancelled handle leaves the ready queue
            loop.call_at(loop.time() - 1, lambda: None)
            seen["timer due"] = others_waiting(loop)
            for _ in range(3):  # the timer runs after this task's next step
                await asyncio.sleep(0)
            loop.add_reader(a.fileno(), lambda: None)
            seen["watched, quiet"] = others_waiting(loop)
            b.send(b"x")
            seen["watched, ready"] = others_waiting(loop)
            loop.remove_reader(a.fileno())
            return seen

        assert _run(main) == {
            "idle": False,
            "callback": True,
            "timer due": True,
            "watched, quiet": False,
            "watched, ready": True,
        }


def test_a_turn_lets_the_ready_tasks_run_first_and_none_is_taken_when_nothing_waits():
    async def main():
        loop = asyncio.get_running_loop()
        order: list[str] = []
        await take_turn_if_others_wait(loop)  # nothing waits: no turn, nothing to see
        order.append("alone")
        loop.call_soon(order.append, "other")
        await take_turn_if_others_wait(loop)
        order.append("me")
        return order

    assert _run(main) == ["alone", "other", "me"]


def test_a_loop_whose_state_cannot_be_read_always_gets_its_turn():
    assert others_waiting(object()) is True
