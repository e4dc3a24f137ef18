"""The audit lines a server writes on stderr in JSON log mode (the audit and guard tests)."""

from __future__ import annotations

import json

QUIET = {"HCMCP_LOG_FORMAT": "json", "HCMCP_LOG_LEVEL": "error"}  # audit lines come at any level

# The outcomes of a call that wrote upstream: each comes after a started line.
ACTED = {
    "created",
    "updated_existing",
    "updated",
    "paused",
    "resumed",
    "deleted",
    "partly_deleted",
    "already_gone",
    "failed",
}


def audits(stderr: str) -> list[dict]:
    """The final audit line of each call (the one that says how it ended), in order. Every one of
    them whose call acted upstream must follow its own ``started`` line (issue 30: the audit is
    written before the act), which is checked here and left out."""
    records = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    records = [record for record in records if record["event"] == "audit"]
    finals = []
    for index, record in enumerate(records):
        if record["outcome"] == "started":
            continue
        if record["outcome"] in ACTED:
            before = records[index - 1] if index else {}
            assert before.get("outcome") == "started" and before["tool"] == record["tool"], (
                before,
                record,
            )
            assert before.get("approved_by") == record.get("approved_by"), (before, record)
            # a new check's uuid comes with the instance's answer
            if record["tool"] != "create_check":
                assert before["checks"] == record["checks"], (before, record)
        finals.append(record)
    return finals
