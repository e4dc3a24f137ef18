"""The transcript replay, by job: format (loading a transcript), patterns (matching a message),
transports (stdio and Streamable HTTP, to a spawned command or a running URL), targets (what a
server under test is and what it serves), runner (replaying one transcript). The command is
conformance/transcripts.py (``python -m conformance.transcripts``)."""
