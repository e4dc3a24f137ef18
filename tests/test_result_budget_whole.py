"""Issue 22, finding 7: one budget for what a client receives, and pages for the list tools.

Through the real process, in the 2025 era over stdio and the 2026 era over HTTP on 127.0.0.1:
HCMCP_RESULT_BUDGET bounds the whole serialized tools/call result (every content block,
structuredContent, and what the protocol adds), a long text is cut to fit it, and list_checks,
list_pings and list_flips read page after page through offset exactly as their note says, with
nothing lost or repeated.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from support import HCMCP, ROOT, StdioPeer
from support.served import Served, clean_env, modern_call

BUDGET = 8192
ENV = {"HCMCP_RESULT_BUDGET": str(BUDGET), "ELICITATION": "false"}
NEXT = re.compile(r"For the next page, call (\w+) again with the same arguments and offset=(\d+)\.")


def wire(value: object) -> int:
    """Bytes of a value as the server writes it: compact JSON, UTF-8."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


class Stdio2025:
    def __init__(self) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HEALTHCHECKS_", "HCMCP_", "ELICITATION"))
        }
        self.peer = StdioPeer([*HCMCP, "--demo"], env={**env, **ENV})
        self.peer.__enter__()
        self.peer.initialize()

    def call(self, name: str, arguments: dict) -> dict:
        return self.peer.request("tools/call", {"name": name, "arguments": arguments})["result"]

    def close(self) -> None:
        self.peer.__exit__(None, None, None)


class Http2026:
    def __init__(self) -> None:
        self.served = Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env=clean_env(**ENV))

    def call(self, name: str, arguments: dict) -> dict:
        message, headers = modern_call(name, arguments)
        status, _, [answer] = self.served.post(message, headers, revision="2026-07-28")
        assert status == 200
        assert answer["result"]["resultType"] == "complete"
        return answer["result"]

    def close(self) -> None:
        self.served.__exit__(None, None, None)


@pytest.fixture(params=["2025-11-25 stdio", "2026-07-28 http"])
def server(request):
    client = Stdio2025() if request.param.startswith("2025") else Http2026()
    yield client
    client.close()


def within_budget(result: dict) -> dict:
    assert wire(result) <= BUDGET, wire(result)
    assert not result.get("isError"), result["content"][0]["text"]
    return result["structuredContent"]


def test_a_long_desc_is_cut_so_that_the_whole_result_fits(server):
    created = within_budget(
        server.call(
            "create_check", {"name": "long", "desc": "All about it. " * 5000, "timeout": 3600}
        )
    )
    got = server.call("get_check", {"check": created["check"]["uuid"]})
    check = within_budget(got)["check"]
    assert "more characters cut here to keep the result under 8 KiB]" in check["desc"]
    assert len(check["desc"]) < BUDGET / 2  # both copies had to fit
    assert got["content"][0]["text"].endswith(
        json.dumps(got["structuredContent"], ensure_ascii=False, separators=(",", ":"))
    )


def test_list_checks_pages_through_every_check_as_its_note_says(server):
    made = {
        within_budget(
            server.call(
                "create_check",
                {"name": f"paged {n:02d} " + "n" * 80, "tags": ["paged"], "timeout": 3600},
            )
        )["check"]["uuid"]
        for n in range(30)
    }
    seen, offset, pages = [], 0, 0
    while True:
        page = within_budget(
            server.call("list_checks", {"tag": ["paged"], "limit": 500, "offset": offset})
        )
        assert page["matched"] == 30 and page["returned"] == len(page["checks"]) > 0
        seen += [c["uuid"] for c in page["checks"]]
        pages += 1
        if "next_offset" not in page:
            assert (
                offset == 0
                or f"Showing checks {offset + 1} to 30 of 30: the last page." in page["note"]
            )
            break
        tool, told = NEXT.search(page["note"]).groups()
        assert (
            tool == "list_checks" and int(told) == page["next_offset"] == offset + page["returned"]
        )
        assert "did not fit the 8 KiB result budget" in page["note"]
        offset = page["next_offset"]
    assert pages > 1 and len(seen) == len(set(seen)) == 30 and set(seen) == made
    past = within_budget(server.call("list_checks", {"tag": ["paged"], "offset": 30}))
    assert past["checks"] == [] and "next_offset" not in past
    assert past["note"].endswith(
        "offset 30 is past the last of the 30 matching checks; call list_checks again "
        "with a lower offset (0 for the first page)."
    )


@pytest.mark.parametrize("tool, arguments", [("list_pings", {}), ("list_flips", {})])
def test_list_pings_and_flips_take_an_offset(server, tool, arguments):
    uuid = "13ea1137-3170-5c05-a318-2f655c94fccc"  # the demo's Nightly backup: pings and a flip
    for name in ("pause_check", "resume_check", "pause_check"):  # each records a flip
        within_budget(server.call(name, {"check": uuid}))
    whole = within_budget(server.call(tool, {"check": uuid, **arguments}))
    entries = whole["pings" if tool == "list_pings" else "flips"]
    assert len(entries) >= 2, whole
    first = within_budget(server.call(tool, {"check": uuid, "limit": 1}))
    assert first["next_offset"] == 1
    assert NEXT.search(first["note"]).groups() == (tool, "1")
    second = within_budget(server.call(tool, {"check": uuid, "limit": 1, "offset": 1}))
    key = "pings" if tool == "list_pings" else "flips"
    assert first[key] + second[key] == entries[:2]


@pytest.mark.parametrize("value", ["64k", "100", "99999999999", "-1", ""])
def test_a_result_budget_that_is_not_a_size_stops_the_server(value):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "HCMCP_"))}
    proc = subprocess.run(
        [*HCMCP, "tools", "--demo"],
        env={**env, "HCMCP_RESULT_BUDGET": value},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        f"hcmcp: HCMCP_RESULT_BUDGET={value!r} is not a valid size: give a whole number of "
        "bytes from 8192 to 16777216 (the default, 65536, is about 16k tokens)\n"
    )


def test_an_entry_too_large_for_any_page_is_skipped_and_paging_goes_on():
    """Issue 30, finding 10: one check whose summary alone is larger than the whole budget ended
    paging (offset 9 of 15 returned nothing and no next_offset, so the 5 checks after it could
    only be found by guessing offset=10). Now it is skipped, named by its position, and the page
    goes on past it; reading page after page as the notes say reaches every other check."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    checks = [
        {
            "name": f"check {n:02d}",
            "slug": f"check-{n:02d}",
            "tags": "t",
            "status": "up",
            "unique_key": f"{n:040x}",
        }
        for n in range(15)
    ]
    checks[9]["name"] = "huge " + "x" * (BUDGET * 2)

    class Instance(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps({"checks": checks}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    instance = ThreadingHTTPServer(("127.0.0.1", 0), Instance)
    threading.Thread(target=instance.serve_forever, daemon=True).start()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HEALTHCHECKS_", "HCMCP_", "ELICITATION"))
    }
    env |= ENV | {
        "HEALTHCHECKS_URL": f"http://127.0.0.1:{instance.server_address[1]}",
        "HEALTHCHECKS_API_KEY": "hcr_paging_test_key_0123456789ab",
    }
    try:
        with StdioPeer(HCMCP, env=env) as peer:
            peer.initialize()

            def call(offset: int) -> dict:
                arguments = {"offset": offset}
                message = peer.request(
                    "tools/call", {"name": "list_checks", "arguments": arguments}
                )
                return within_budget(message["result"])

            at_nine = call(9)
            # 11 to 15 fit: the last page
            assert at_nine["matched"] == 15 and "next_offset" not in at_nine
            assert (
                "Check 10 of 15 is larger than the whole 8 KiB result budget and cannot be shown "
                "(raise HCMCP_RESULT_BUDGET to see it). Showing checks 11 to 15 of 15: the last page."
            ) in at_nine["note"], at_nine["note"]
            assert [c["name"] for c in at_nine["checks"]] == [
                f"check {n:02d}" for n in range(10, 15)
            ]
            seen, offset = [], 0
            while True:
                page = call(offset)
                seen += [c["name"] for c in page["checks"]]
                if "next_offset" not in page:
                    break
                assert NEXT.search(page["note"]).groups() == (
                    "list_checks",
                    str(page["next_offset"]),
                )
                offset = page["next_offset"]
            assert seen == [f"check {n:02d}" for n in range(15) if n != 9]
    finally:
        instance.shutdown()
        instance.server_close()
