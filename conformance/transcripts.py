"""Replays the conformance transcripts (conformance/transcripts/<era>/<name>.json) against a real server.

    python -m conformance.transcripts                                # against hcmcp, every transcript, stdio
    python -m conformance.transcripts --transport http               # ... over Streamable HTTP
    python -m conformance.transcripts --transport both FILE...       # some, over both
    python -m conformance.transcripts --server-command "CMD ARGS…"   # against any MCP server over stdio
    python -m conformance.transcripts --url http://HOST:PORT/mcp     # ... or one already serving HTTP

One line per transcript and transport (ok / FAIL with the first difference / skip and why), then
``N passed, N failed`` (and ``, N skipped`` when some could not run); exit 1 on any failure.
The format is documented in conformance/transcripts/README.md. The work is done in
conformance/replay/ (format, patterns, transports, targets, runner); this module is the command,
and keeps the names the tests and older callers import from it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.replay.format import (
    ROOT,
    SERVERS,
    TRANSCRIPTS,
    TRANSPORTS,
    Transcript,
    TranscriptError,
    find_transcripts,
    load,
)
from conformance.replay.patterns import Mismatch, match, substitute
from conformance.replay.runner import SCHEMAS, Outcome, run_transcript
from conformance.replay.targets import Target, discover

__all__ = [
    "ROOT",
    "SERVERS",
    "TRANSCRIPTS",
    "TRANSPORTS",
    "Mismatch",
    "Outcome",
    "Path",
    "Target",
    "Transcript",
    "TranscriptError",
    "discover",
    "find_transcripts",
    "load",
    "main",
    "match",
    "run_transcript",
    "substitute",
]


def print_outcome(outcome: Outcome) -> None:
    transcript, transport = outcome.transcript, outcome.transport
    verdict = outcome.verdict
    if verdict == "skip":
        print(f"skip {transcript.name} [{transport}]: {outcome.skipped}")
        return
    left_out = "".join(
        f"; {count} step(s) not run: {why}" for why, count in outcome.steps_not_run.items()
    )
    print(
        f"{verdict if verdict != 'ok' else 'ok  '} {transcript.name} [{transport}] {outcome.seconds:.2f}s  "
        f"{transcript.title}{left_out}"
    )
    bug = transcript.bug_on(transport) if outcome.strict else None
    if verdict == "known bug":
        print(
            f"     known bug, at step {outcome.failed_step} as expected: {transcript.known_bug['because']}"
        )
    elif bug is not None:
        print(
            f"     marked known_bug at step {bug['fails_at_step']}, but "
            + (
                "it passes: the fix is in, remove the mark"
                if outcome.passed
                else f"it failed at step {outcome.failed_step}: a different failure"
            )
        )
    if verdict != "ok":
        for line in outcome.report:
            print(f"     {line}")
    for note in outcome.notes:
        print(f"     note: {note}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.transcripts",
        description="Replay MCP conformance transcripts against hcmcp (default) or any MCP server.",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http", "both"),
        default=None,
        help="against hcmcp: which transport (default stdio)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--server-command",
        metavar='"CMD ARGS…"',
        help="spawn this MCP server (one process per transcript) and speak stdio to it",
    )
    where.add_argument(
        "--url", metavar="URL", help="speak Streamable HTTP to the MCP server already serving URL"
    )
    parser.add_argument(
        "files", nargs="*", help="transcript files or folders (default: every transcript)"
    )
    args = parser.parse_args(argv)
    if not any(SCHEMAS.glob("*.schema.json")):
        print(
            f"the official MCP JSON schemas are missing: every message is validated against them, so put "
            f"<revision>.schema.json (2024-11-05 … 2026-07-28, from the spec repository's schema/ folder) in {SCHEMAS}"
        )
        return 2
    if args.server_command is not None:
        target = Target.from_command(args.server_command)
    elif args.url is not None:
        target = Target(url=args.url)
    else:
        target = Target.hcmcp()
    if target.is_hcmcp:
        transports = TRANSPORTS if args.transport == "both" else (args.transport or "stdio",)
    else:
        if args.transport not in (None, *target.transports):
            parser.error(
                f"--transport {args.transport} does not fit the target: "
                f"--server-command speaks stdio, --url Streamable HTTP"
            )
        transports = target.transports
        try:
            target.offers = discover(target)
        except (OSError, ValueError, RuntimeError) as error:
            print(f"cannot reach the target ({target.describe()}): {error}")
            return 2
        offers = target.offers
        if offers.legacy is None and not offers.modern and offers.authorization is None:
            print(
                f"the target ({target.describe()}) answered neither initialize ({offers.why_no_legacy}) "
                f"nor server/discover ({offers.why_no_modern}): nothing to replay"
            )
            return 2
        print(f"target: {target.describe()} — {offers.summary()}")
    passed = failed = known = skipped = 0
    for path in find_transcripts(args.files):
        try:
            transcript = load(path)
        except TranscriptError as error:
            print(f"FAIL {path}: {error}")
            failed += 1
            continue
        for transport in transports:
            if transport not in transcript.transports:
                print(
                    f"n/a  {transcript.name} [{transport}]: written for {', '.join(transcript.transports)} only"
                )
                continue
            outcome = run_transcript(transcript, transport, target)
            print_outcome(outcome)
            verdict = outcome.verdict
            passed += verdict == "ok"
            failed += verdict == "FAIL"
            known += verdict == "known bug"
            skipped += verdict == "skip"
    if known:
        print(
            f"{known} known protocol bug(s) still reproduce (their transcripts fail as expected; see known_bug)"
        )
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
