"""The schema helper holds a tools/call result to the called tool's outputSchema (issue 28), and can fail."""

from __future__ import annotations

import pytest

from support import validate_server_message

REVISION = "2025-11-25"
OLD_ERROR = {
    "content": [{"type": "text", "text": "There is no check ... (404)."}],
    "isError": True,
    "structuredContent": {
        "error": "There is no check ... (404).",
        "kind": "not_found",
        "retryable": False,
        "status": 404,
    },
}
NEW_ERROR = {
    "content": [{"type": "text", "text": "There is no check ... (404)."}],
    "isError": True,
    "_meta": {"io.hcmcp/error": {"kind": "not_found", "retryable": False, "status": 404}},
}


def answer(result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def test_an_error_result_that_fails_the_tools_output_schema_is_refused():
    with pytest.raises(
        AssertionError, match="isError get_check result does not match the tool's outputSchema"
    ):
        validate_server_message(REVISION, answer(OLD_ERROR), "tools/call", "get_check")
    validate_server_message(REVISION, answer(NEW_ERROR), "tools/call", "get_check")


def test_a_success_must_carry_structured_content_that_matches():
    text = {"content": [{"type": "text", "text": "{}"}]}
    with pytest.raises(AssertionError, match="has no structuredContent"):
        validate_server_message(REVISION, answer(text), "tools/call", "get_status")
    with pytest.raises(AssertionError, match="outputSchema"):
        validate_server_message(
            REVISION,
            answer({**text, "structuredContent": {"ok": "yes"}}),
            "tools/call",
            "get_status",
        )
    # The schema a session listed wins over hcmcp's own catalog (a foreign server's tool of that name).
    validate_server_message(
        REVISION,
        answer({**text, "structuredContent": {"ok": "yes"}}),
        "tools/call",
        "get_status",
        {"get_status": {"type": "object", "properties": {"ok": {"type": "string"}}}},
    )


def test_a_tools_call_result_needs_the_tools_name():
    with pytest.raises(AssertionError, match="needs the name of the tool"):
        validate_server_message(REVISION, answer(NEW_ERROR), "tools/call")
