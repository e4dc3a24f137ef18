"""benchmarks/fixed_upstream.py replays what the simulator answered, over real loopback sockets.

The comparison tables of benchmarks.latency and benchmarks.http rest on it: every server and the
floor must get the simulator's very bytes, on one keep-alive connection, and nothing else.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from benchmarks._upstream import simulator
from benchmarks.fixed_upstream import fixed_upstream, record


def _get(
    connection: http.client.HTTPConnection, path: str, key: str = "ignored"
) -> tuple[int, dict[str, str], bytes]:
    connection.request("GET", path, headers={"X-Api-Key": key})
    response = connection.getresponse()
    return (
        response.status,
        {name.lower(): value for name, value in response.getheaders()},
        response.read(),
    )


def test_the_simulators_answers_come_back_byte_for_byte_on_one_connection() -> None:
    with simulator("demo") as sim:
        direct = http.client.HTTPConnection("127.0.0.1", urlsplit(sim.url).port, timeout=10)
        listed = _get(direct, "/api/v3/checks/", sim.rw_key)
        check = f"/api/v3/checks/{json.loads(listed[2])['checks'][0]['uuid']}"
        one = _get(direct, check, sim.rw_key)
        direct.close()
        answers = record(sim.url, sim.rw_key, ["/api/v3/checks/", check])
    with fixed_upstream(answers) as url:
        replay = http.client.HTTPConnection("127.0.0.1", urlsplit(url).port, timeout=10)
        try:
            for _ in range(3):  # keep-alive: the same connection answers again and again
                status, headers, body = _get(replay, check)
                assert (status, body) == (200, one[2])
                assert headers["content-type"] == one[1]["content-type"]
                assert headers["content-length"] == str(len(one[2]))
                # the query is not part of the key
                status, _, body = _get(replay, "/api/v3/checks/?tag=prod")
                assert (status, body) == (200, listed[2])
            status, _, body = _get(replay, "/api/v3/channels/")
            assert status == 404 and b"not recorded" in body
        finally:
            replay.close()


def test_only_loopback_is_recorded() -> None:
    try:
        record("http://192.0.2.1:8000", "key", ["/api/v3/checks/"])
    except ValueError as exc:
        assert "127.0.0.1" in str(exc)
    else:
        raise AssertionError("record() accepted an address off loopback")
