"""The Dockerfile read as its instructions and build stages, continuation lines joined and comments
dropped (the container tests, and the arm64 test that replays its build stage)."""

from __future__ import annotations

import re

from support import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(
        r"\\\n",
        " ",
        "\n".join(
            line
            for line in DOCKERFILE.read_text().splitlines()
            if not line.lstrip().startswith("#")
        ),
    )
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
        for line in text.splitlines()
        if line.strip()
    ]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for name, args in instructions():
        if name == "FROM":
            result.append([])
        if result:  # an ARG before the first FROM belongs to no stage
            result[-1].append((name, args))
    return result


def final(name: str) -> list[str]:
    return [args for instruction, args in stages()[-1] if instruction == name]


def env_of_final_stage() -> dict[str, str]:
    env = {}
    for args in final("ENV"):
        for key, value in re.findall(r"(\w+)=(\S+)", args):
            env[key] = value
    return env


def default_base() -> str:
    args = [
        args
        for instruction, args in instructions()
        if instruction == "ARG" and args.startswith("BASE=")
    ]
    assert len(args) == 1, args
    return args[0].split("=", 1)[1]
