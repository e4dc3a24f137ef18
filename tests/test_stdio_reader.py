"""The stdio line reader: one buffer across the synchronous start and the event loop."""

from __future__ import annotations

import os
import tempfile

import anyio
import pytest

from hcmcp.protocol import stdio
from hcmcp.protocol.stdio import TOO_LONG, LineReader


def _pipe_with(data: bytes) -> int:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


async def _drain(reader: LineReader) -> list:
    lines = []
    while (line := await reader.next_line()) is not None:
        lines.append(line)
    return lines


def test_lines_crlf_and_a_last_line_without_newline():
    reader = LineReader(_pipe_with(b'{"a":1}\r\n\n{"b":2}\n{"c":3}'))
    assert reader.read_line() == b'{"a":1}'  # the synchronous phase takes one...
    # ...the loop the rest, nothing lost
    assert anyio.run(_drain, reader) == [
        b"",
        b'{"b":2}',
        b'{"c":3}',
    ]


def test_an_over_long_line_is_refused_once_and_the_next_line_survives(monkeypatch):
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 10)
    reader = LineReader(_pipe_with(b"x" * 5_000 + b"\nok\n" + b"y" * 11 + b"\n"))
    assert anyio.run(_drain, reader) == [TOO_LONG, b"ok", TOO_LONG]


def test_a_regular_file_on_stdin_is_read_through_a_thread():
    with tempfile.TemporaryFile() as file:
        file.write(b"one\ntwo\n")
        file.seek(0)
        reader = LineReader(file.fileno())
        assert anyio.run(_drain, reader) == [b"one", b"two"]
        assert reader._pollable is False


@pytest.mark.parametrize("chunks", [[b'{"a"', b":1}\n"], [b"\n", b"x\n"]])
def test_lines_split_across_reads(chunks):
    read_fd, write_fd = os.pipe()

    async def scenario():
        reader = LineReader(read_fd)
        async with anyio.create_task_group() as tasks:

            async def feed():
                for chunk in chunks:
                    os.write(write_fd, chunk)
                    await anyio.sleep(0.01)
                os.close(write_fd)

            tasks.start_soon(feed)
            return await _drain(reader)

    assert anyio.run(scenario) == b"".join(chunks).split(b"\n")[:-1]
