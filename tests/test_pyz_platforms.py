"""The universal .pyz picks, on every platform it carries, a complete set of native modules made for it.

For each platform (Linux x86_64 and aarch64 with glibc and with musl, macOS arm64 and x86_64, Windows
x86_64 and arm64) and each CPython 3.11-3.14, the compatibility tags come from `packaging.tags`, the
library pip's own tags come from (its platform functions, given that platform's glibc, musl or macOS
version and machine); the loader inside the .pyz must pick one wheel for each of orjson and msgspec
from those tags alone, and every native file of the pick must be for that platform by its own header:
ELF e_machine, Mach-O cputype (each slice of a universal2 file), PE machine. Platforms outside the
list get an incomplete pick (the loader then stops with one line: tests/test_pyz.py). The loader's
own tag computation, done with the standard library at run time, must equal packaging's: on this
machine as a whole, and for other macOS and Linux versions by its parts.
"""

from __future__ import annotations

import io
import struct
import sys
import sysconfig
import zipfile
from functools import cache

import pytest

from pyz_build import loader_of, universal_pyz

tags = pytest.importorskip(
    "packaging.tags", reason="packaging is a dependency of pytest: pip install pytest"
)
from packaging import _manylinux, _musllinux  # noqa: E402

PYTHONS = [(3, 11), (3, 12), (3, 13), (3, 14)]
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}
MACHO_CPU = {"x86_64": 0x01000007, "arm64": 0x0100000C}
PE_MACHINE = {"x86_64": 0x8664, "arm64": 0xAA64}

# (name, how packaging.tags makes that platform's tags, the header every native file must carry)
PLATFORMS = [
    ("linux-x86_64-glibc-2.17", ("linux", "x86_64", (2, 17), None), ("elf", "x86_64", "linux-gnu")),
    ("linux-x86_64-glibc-2.39", ("linux", "x86_64", (2, 39), None), ("elf", "x86_64", "linux-gnu")),
    (
        "linux-aarch64-glibc-2.17",
        ("linux", "aarch64", (2, 17), None),
        ("elf", "aarch64", "linux-gnu"),
    ),
    (
        "linux-aarch64-glibc-2.36",
        ("linux", "aarch64", (2, 36), None),
        ("elf", "aarch64", "linux-gnu"),
    ),
    (
        "linux-x86_64-musl-1.2",
        ("linux", "x86_64", (-1, -1), (1, 2)),
        ("elf", "x86_64", "linux-musl"),
    ),
    (
        "linux-aarch64-musl-1.2",
        ("linux", "aarch64", (-1, -1), (1, 2)),
        ("elf", "aarch64", "linux-musl"),
    ),
    ("macos-11-arm64", ("mac", "arm64", (11, 0)), ("macho", "arm64", "darwin")),
    ("macos-15-arm64", ("mac", "arm64", (15, 0)), ("macho", "arm64", "darwin")),
    ("macos-10.15-x86_64", ("mac", "x86_64", (10, 15)), ("macho", "x86_64", "darwin")),
    ("macos-14-x86_64", ("mac", "x86_64", (14, 0)), ("macho", "x86_64", "darwin")),
    ("windows-x86_64", ("windows", "win-amd64"), ("pe", "x86_64", "win_amd64")),
    ("windows-arm64", ("windows", "win-arm64"), ("pe", "arm64", "win_arm64")),
]
UNSUPPORTED = [
    ("linux-riscv64-glibc-2.39", ("linux", "riscv64", (2, 39), None)),
    ("linux-x86_64-glibc-2.16", ("linux", "x86_64", (2, 16), None)),  # older than manylinux2014
    ("linux-x86_64-musl-1.1", ("linux", "x86_64", (-1, -1), (1, 1))),
    ("macos-10.14-x86_64", ("mac", "x86_64", (10, 14))),
    ("windows-x86", ("windows", "win32")),
]


def platform_tags(how: tuple, monkeypatch) -> list[str]:
    """That platform's platform tags, from packaging's own functions for it."""
    kind = how[0]
    if kind == "mac":
        return list(tags.mac_platforms(how[2], how[1]))
    if kind == "windows":
        monkeypatch.setattr(sysconfig, "get_platform", lambda: how[1])
        return list(tags._generic_platforms())
    _, arch, glibc, musl = how
    monkeypatch.setattr(sysconfig, "get_platform", lambda: f"linux-{arch}")
    monkeypatch.setattr(_manylinux, "_get_glibc_version", lambda: _manylinux._GLibCVersion(*glibc))
    monkeypatch.setattr(
        _musllinux,
        "_get_musl_version",
        lambda executable: _musllinux._MuslVersion(*musl) if musl else None,
    )
    return list(tags._linux_platforms(is_32bit=False))


def interpreter_tags(python: tuple[int, int], platforms: list[str]) -> list[str]:
    """What pip's tags for CPython `python` on those platforms are, best first."""
    abi = "cp{}{}".format(*python)
    return [
        str(tag)
        for tag in [
            *tags.cpython_tags(python, [abi], platforms),
            *tags.compatible_tags(python, abi, platforms),
        ]
    ]


@cache
def payload() -> dict[str, bytes]:
    with (
        zipfile.ZipFile(universal_pyz()) as outer,
        zipfile.ZipFile(io.BytesIO(outer.read("payload.zip"))) as inner,
    ):
        return {info.filename: inner.read(info) for info in inner.infolist()}


@cache
def loader() -> dict:
    return loader_of(universal_pyz())


def machines(data: bytes) -> tuple[str, set[int]]:
    """(format, the machine codes its header names) of a native file: ELF, Mach-O (thin or fat) or PE."""
    if data[:4] == b"\x7fELF":
        order = "<" if data[5] == 1 else ">"
        return "elf", {struct.unpack(order + "H", data[18:20])[0]}
    if data[:4] == b"\xcf\xfa\xed\xfe":  # MH_MAGIC_64, little-endian
        return "macho", {struct.unpack("<i", data[4:8])[0]}
    if data[:4] == b"\xca\xfe\xba\xbe":  # FAT_MAGIC: a universal binary, big-endian headers
        count = struct.unpack(">I", data[4:8])[0]
        return "macho", {
            struct.unpack(">i", data[8 + 20 * i : 12 + 20 * i])[0] for i in range(count)
        }
    if data[:2] == b"MZ":
        offset = struct.unpack("<I", data[0x3C:0x40])[0]
        assert data[offset : offset + 4] == b"PE\0\0"
        return "pe", {struct.unpack("<H", data[offset + 4 : offset + 6])[0]}
    return "unknown", set()


def expected_machine(kind: str, machine: str) -> int:
    return {"elf": ELF_MACHINE, "macho": MACHO_CPU, "pe": PE_MACHINE}[kind][machine]


@pytest.mark.parametrize("python", PYTHONS, ids=lambda v: "cp{}{}".format(*v))
@pytest.mark.parametrize(("name", "how", "header"), PLATFORMS, ids=[p[0] for p in PLATFORMS])
def test_the_loader_picks_a_complete_set_made_for_each_platform_carried(
    name, how, header, python, monkeypatch
):
    chosen = loader()["choose"](interpreter_tags(python, platform_tags(how, monkeypatch)))
    assert set(chosen) == {"orjson", "msgspec"}, f"{name} cp{python[0]}{python[1]}: picked {chosen}"
    kind, machine, soabi = header
    files = payload()
    for wheel in chosen.values():
        native = {
            path: data
            for path, data in files.items()
            if path.startswith(f"_wheels/{wheel}/")
            and path.endswith((".so", ".pyd", ".dylib", ".dll"))
        }
        assert native, f"{wheel}: no native module in the payload"
        for path, data in native.items():
            form, codes = machines(data)
            assert form == kind and expected_machine(kind, machine) in codes, (
                f"{path}: {form} {codes}"
            )
            if kind == "macho":
                assert codes <= set(MACHO_CPU.values())
        modules = [
            path for path in native if path.rsplit("/", 1)[-1].startswith(("_core.", "orjson."))
        ]
        assert modules, native.keys()
        version = "{}{}".format(*python)
        # the extension's own suffix names the ABI: cpython-313-..., cp313-win_...
        for path in modules:
            assert f"cpython-{version}-" in path or f".cp{version}-" in path, path
            assert soabi in path, path


@pytest.mark.parametrize("python", PYTHONS, ids=lambda v: "cp{}{}".format(*v))
@pytest.mark.parametrize(("name", "how"), UNSUPPORTED, ids=[p[0] for p in UNSUPPORTED])
def test_a_platform_outside_the_list_gets_no_complete_set(name, how, python, monkeypatch):
    chosen = loader()["choose"](interpreter_tags(python, platform_tags(how, monkeypatch)))
    assert set(chosen) != {"orjson", "msgspec"}, f"{name}: picked {chosen}"


def test_a_free_threaded_or_other_interpreter_gets_no_complete_set():
    threaded = [str(t) for t in tags.cpython_tags((3, 13), ["cp313t"], ["manylinux_2_17_x86_64"])]
    assert set(loader()["choose"](threaded)) != {"orjson", "msgspec"}
    pypy = [str(t) for t in tags.generic_tags("pp311", ["pypy311_pp73"], ["manylinux_2_17_x86_64"])]
    assert loader()["choose"](pypy) == {}


def test_the_loaders_own_tags_are_packagings_here():
    assert loader()["sys_tags"]() == [str(tag) for tag in tags.sys_tags()]


@pytest.mark.parametrize(
    ("version", "arch"),
    [
        ((10, 9), "x86_64"),
        ((10, 15), "x86_64"),
        ((11, 0), "arm64"),
        ((14, 2), "x86_64"),
        ((15, 0), "arm64"),
        ((10, 5), "i386"),
        ((10, 5), "ppc64"),
        ((10, 4), "ppc"),
    ],
)
def test_the_loaders_macos_platforms_are_packagings(version, arch):
    assert list(loader()["mac_platforms"](version, arch)) == list(tags.mac_platforms(version, arch))


@pytest.mark.parametrize(
    ("arch", "glibc", "musl"),
    [
        ("x86_64", (2, 36), None),
        ("aarch64", (2, 17), None),
        ("x86_64", (-1, -1), (1, 2)),
        ("aarch64", (-1, -1), (1, 1)),
        ("s390x", (2, 28), None),
    ],
)
def test_the_loaders_linux_platforms_are_packagings(arch, glibc, musl, monkeypatch):
    ours = list(loader()["linux_platforms"](f"linux-{arch}", False, glibc, musl))
    assert ours == platform_tags(("linux", arch, glibc, musl), monkeypatch)


@pytest.mark.parametrize("abis", [["cp311"], ["cp314"], ["cp313t"], ["cp312d", "cp312"]])
def test_the_loaders_cpython_tags_are_packagings(abis):
    version = (3, int(abis[0][3:5]))
    platforms = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64"]
    expected = [
        str(t)
        for t in [
            *tags.cpython_tags(version, abis, platforms),
            *tags.compatible_tags(version, "cp{}{}".format(*version), platforms),
        ]
    ]
    assert loader()["cpython_tags"](version, abis, platforms) == expected


def test_the_payload_carries_every_platform_for_every_python_and_nothing_twice():
    wheels = loader()["WHEELS"]
    assert set(wheels) == {"orjson", "msgspec"}
    names = [name for rows in wheels.values() for name in rows]
    assert len(names) == len(set(names))
    folders = {path.split("/")[1] for path in payload() if path.startswith("_wheels/")}
    assert folders == set(names), (
        "each wheel the loader may pick has its files, and only those are carried"
    )
    files = payload()
    # a wheel's own copy of a shared file differs from it (CRLF on Windows)
    for (
        path,
        data,
    ) in files.items():
        if path.startswith("_wheels/") and path.split("/", 2)[2] in files:
            assert files[path.split("/", 2)[2]] != data, path
    own_python = {path for path in files if path.startswith("_wheels/") and path.endswith(".py")}
    assert all("-win_" in path for path in own_python), own_python
    assert sys.version_info >= (3, 11)


@pytest.mark.parametrize(
    "platform", ["windows-x86_64", "macos-10.15-x86_64", "linux-aarch64-musl-1.2"]
)
def test_unpacking_another_platforms_pick_gives_exactly_its_wheels_files(
    platform, tmp_path, monkeypatch
):
    """The loader's unpacking, driven with another platform's pick: the shared files, then the picked
    wheels' own (a Windows wheel's CRLF copy of orjson/__init__.py wins over the shared one), and no
    native module of any other wheel."""
    how, header = next((how, header) for name, how, header in PLATFORMS if name == platform)
    namespace = loader()
    chosen = namespace["choose"](interpreter_tags((3, 12), platform_tags(how, monkeypatch)))
    target = tmp_path / "hash" / "key"
    namespace["unpack"](str(universal_pyz()), str(tmp_path / "hash"), str(target), chosen)
    files = payload()
    natives = sorted(p.name for p in target.rglob("*") if p.suffix in (".so", ".pyd"))
    assert len(natives) == 2 and all(header[2] in name for name in natives), natives
    for wheel in chosen.values():
        for path, data in files.items():
            if path.startswith(f"_wheels/{wheel}/"):
                assert (target / path.split("/", 2)[2]).read_bytes() == data, path
    assert not (target / "_wheels").exists() and not list(tmp_path.glob("hash/.*"))
