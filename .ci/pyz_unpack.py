# The first run of hcmcp.pyz: which native modules fit this interpreter, and unpacking the payload.
# Written into the archive as pyz_unpack.py by .ci/build-pyz from this template (WHEELS and CARRIED
# filled in); the loader (__main__.py, .ci/pyz_main.py) imports it only when the cache directory
# for this interpreter does not exist yet.
#
# The payload carries the native modules of orjson and msgspec for every platform and CPython that
# the build fetched wheels for: each wheel's own files sit under _wheels/<wheel name>/ in the
# payload, and what the wheels of a project share sits at the top. For each project the wheel whose
# tags rank best among the running interpreter's compatibility tags (the ones pip uses, computed
# here with the standard library: packaging is not needed at run time) is picked; where a project
# has none, the run stops with one line naming the platform, the interpreter and the platforms
# carried. No syntax newer than 3.6, as for the loader.

import os
import sys

# {project: (wheel name, ...)}: the native wheels carried (their tags are in their names)
WHEELS = @WHEELS@
CARRIED = "@CARRIED@"      # the same, for a person: "CPython 3.11, ... on Linux x86_64 glibc 2.17+, ..."
WHEEL_FOLDER = "_wheels/"


def _described():
    """The running interpreter, for a person: "CPython 3.11 (/usr/bin/python3) on linux aarch64"."""
    from __main__ import _machine   # the loader's (this module runs inside the .pyz only)
    return "%s %d.%d (%s) on %s %s" % (
        {"cpython": "CPython", "pypy": "PyPy"}.get(sys.implementation.name, sys.implementation.name),
        sys.version_info[0], sys.version_info[1], sys.executable, sys.platform, _machine())


# --- compatibility tags, as packaging.tags.sys_tags() computes them (CPython), with the stdlib only ---

def _normalize(text):
    return text.replace(".", "_").replace("-", "_").replace(" ", "_")


def _elf_interpreter(path):
    """The PT_INTERP of an ELF file (its dynamic loader), or None."""
    import struct
    try:
        with open(path, "rb") as f:
            ident = f.read(16)
            if ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
                return None
            wide, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
            head = f.read(48 if wide else 36)
            if wide:
                phoff = struct.unpack(order + "Q", head[16:24])[0]
                phentsize, phnum = struct.unpack(order + "HH", head[38:42])
            else:
                phoff = struct.unpack(order + "I", head[12:16])[0]
                phentsize, phnum = struct.unpack(order + "HH", head[26:30])
            for index in range(phnum):
                f.seek(phoff + index * phentsize)
                entry = f.read(phentsize)
                kind = struct.unpack(order + "I", entry[:4])[0]
                if kind != 3:   # PT_INTERP
                    continue
                if wide:
                    offset, size = struct.unpack(order + "Q", entry[8:16])[0], struct.unpack(order + "Q", entry[32:40])[0]
                else:
                    offset, size = struct.unpack(order + "I", entry[4:8])[0], struct.unpack(order + "I", entry[16:20])[0]
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode("ascii", "replace")
    except (OSError, struct.error, ValueError):
        return None
    return None


def _musl_version(executable):
    import re
    import subprocess
    loader = _elf_interpreter(executable)
    if not loader or "musl" not in loader:
        return None
    try:
        done = subprocess.run([loader], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, universal_newlines=True)
    except OSError:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0][:4] != "musl":
        return None
    match = re.match(r"Version (\d+)\.(\d+)", lines[1])
    return (int(match.group(1)), int(match.group(2))) if match else None


def _glibc_version():
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")   # "glibc 2.36"
        major, minor = text.split()[1].split(".")[:2]
        return int(major), int(minor)
    except (AttributeError, ValueError, OSError, IndexError):
        return -1, -1


def _manylinux_platforms(archs, glibc):
    if not any(arch in ("x86_64", "aarch64", "ppc64", "ppc64le", "s390x", "loongarch64", "riscv64")
               for arch in archs):
        return   # i686 and armv7l need a look at the interpreter's ELF flags: not carried, not checked
    too_old = (2, 4) if set(archs) & {"x86_64", "i686"} else (2, 16)
    legacy = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
    tops = [glibc] + [(major, 50) for major in range(glibc[0] - 1, 1, -1)]
    for arch in archs:
        for top in tops:
            lowest = too_old[1] if top[0] == too_old[0] else -1
            for minor in range(top[1], lowest, -1):
                yield "manylinux_%d_%d_%s" % (top[0], minor, arch)
                if (top[0], minor) in legacy:
                    yield "%s_%s" % (legacy[(top[0], minor)], arch)


def linux_platforms(platform_name, is_32bit, glibc, musl):
    linux = _normalize(platform_name)
    if not linux.startswith("linux_"):
        yield linux
        return
    if is_32bit:
        linux = {"linux_x86_64": "linux_i686", "linux_aarch64": "linux_armv8l"}.get(linux, linux)
    arch = linux.split("_", 1)[1]
    archs = {"armv8l": ["armv8l", "armv7l"]}.get(arch, [arch])
    for arch in archs:
        yield "linux_" + arch
    if glibc[0] > 0:
        for tag in _manylinux_platforms(archs, glibc):
            yield tag
    if musl:
        for arch in archs:
            for minor in range(musl[1], -1, -1):
                yield "musllinux_%d_%d_%s" % (musl[0], minor, arch)


def _mac_formats(version, arch):
    formats = [arch]
    if arch == "x86_64":
        if version < (10, 4):
            return []
        formats += ["intel", "fat64", "fat3"]
    elif arch == "i386":
        if version < (10, 4):
            return []
        formats += ["intel", "fat3", "fat"]
    elif arch == "ppc64":
        if version > (10, 5) or version < (10, 4):
            return []
        formats.append("fat64")
    elif arch == "ppc":
        if version > (10, 6):
            return []
        formats += ["fat3", "fat"]
    if arch in ("arm64", "x86_64"):
        formats.append("universal2")
    if arch in ("x86_64", "i386", "ppc64", "ppc", "intel"):
        formats.append("universal")
    return formats


def mac_platforms(version, arch):
    if (10, 0) <= version < (11, 0):
        for minor in range(version[1], -1, -1):
            for binary in _mac_formats((10, minor), arch):
                yield "macosx_10_%d_%s" % (minor, binary)
    if version >= (11, 0):
        for major in range(version[0], 10, -1):
            for binary in _mac_formats((major, 0), arch):
                yield "macosx_%d_0_%s" % (major, binary)
        for minor in range(16, 3, -1):
            for binary in (_mac_formats((10, minor), arch) if arch == "x86_64" else ["universal2"]):
                yield "macosx_10_%d_%s" % (minor, binary)


def _platforms():
    import sysconfig
    is_32bit = sys.maxsize <= 2 ** 32
    if sys.platform == "darwin":
        import platform
        release, _, machine = platform.mac_ver()
        version = tuple(int(part) for part in release.split(".")[:2])
        if version == (10, 16):   # an interpreter built against an old SDK hides the real version
            import subprocess
            release = subprocess.run([sys.executable, "-sS", "-c", "import platform; print(platform.mac_ver()[0])"],
                                     env={"SYSTEM_VERSION_COMPAT": "0"}, stdout=subprocess.PIPE,
                                     universal_newlines=True, check=True).stdout
            version = tuple(int(part) for part in release.split(".")[:2])
        arch = machine if not is_32bit else ("ppc" if machine.startswith("ppc") else "i386")
        return list(mac_platforms(version, arch))
    if sys.platform.startswith("linux"):
        return list(linux_platforms(sysconfig.get_platform(), is_32bit, _glibc_version(),
                                    _musl_version(sys.executable)))
    return [_normalize(sysconfig.get_platform())]


def cpython_tags(version, abis, platforms):
    """packaging.tags.cpython_tags, then compatible_tags(interpreter=cpXY): most preferred first."""
    interpreter = "cp%d%d" % version
    threaded = any(abi.startswith("cp") and "t" in abi[2:].lstrip("0123456789") for abi in abis[:1])
    tags = ["%s-%s-%s" % (interpreter, abi, p) for abi in abis for p in platforms]
    stable = "abi3t" if threaded else "abi3"
    tags += ["%s-%s-%s" % (interpreter, stable, p) for p in platforms]
    tags += ["%s-none-%s" % (interpreter, p) for p in platforms]
    for minor in range(version[1] - 1, 1, -1):
        tags += ["cp%d%d-%s-%s" % (version[0], minor, stable, p) for p in platforms]
    pythons = ["py%d%d" % version, "py%d" % version[0]] + ["py%d%d" % (version[0], m) for m in range(version[1] - 1, -1, -1)]
    tags += ["%s-none-%s" % (py, p) for py in pythons for p in platforms]
    tags.append(interpreter + "-none-any")
    tags += [py + "-none-any" for py in pythons]
    return tags


def sys_tags():
    """The running interpreter's compatibility tags, best first; [] for anything but CPython."""
    if sys.implementation.name != "cpython":
        return []
    import sysconfig
    version = sys.version_info[:2]
    debug = sysconfig.get_config_var("Py_DEBUG")
    debug = "d" if debug or (debug is None and (hasattr(sys, "gettotalrefcount") or
                                                 "_d.pyd" in __import__("_imp").extension_suffixes())) else ""
    threading = "t" if version >= (3, 13) and sysconfig.get_config_var("Py_GIL_DISABLED") else ""
    abis = ["cp%d%d%s%s" % (version[0], version[1], threading, debug)]
    if debug:
        abis.append("cp%d%d%s" % (version[0], version[1], threading))
    return cpython_tags(version, abis, _platforms())


def wheel_tags(name):
    """The tags a wheel's name declares, its compressed tag sets expanded: "cp311-cp311-win_amd64", ..."""
    pythons, abis, platforms = name.split("-")[-3:]
    return [py + "-" + abi + "-" + plat for py in pythons.split(".") for abi in abis.split(".")
            for plat in platforms.split(".")]


def choose(tags):
    """{project: wheel name}: for each project carried, its wheel whose best tag ranks first among
    `tags`; a project none of whose wheels fits is left out."""
    rank = {}
    for index, tag in enumerate(tags):
        rank.setdefault(tag, index)
    chosen = {}
    for project, wheels in sorted(WHEELS.items()):
        fits = [(min(rank[tag] for tag in wheel_tags(name) if tag in rank), name) for name in wheels
                if any(tag in rank for tag in wheel_tags(name))]
        if fits:
            chosen[project] = min(fits)[1]
    return chosen


def selection():
    from __main__ import _stop   # the loader's: one voice for every refusal
    chosen = choose(sys_tags())
    missing = sorted(set(WHEELS) - set(chosen))
    if missing:
        _stop("no native modules (%s) for this platform: %s; this file carries them for %s. "
              "Run hcmcp from source there (README.md), or build a .pyz for it there with .ci/build-pyz --platform host"
              % (", ".join(missing), _described(), CARRIED))
    return chosen



class _Window(object):
    """A read-only file over bytes [start, start + size) of another: the payload, stored in the archive,
    opened in place (reading all of it, 10 MB, cost more than the members the first run takes)."""

    def __init__(self, raw, start, size):
        self.raw, self.start, self.size, self.pos = raw, start, size, 0

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = max(0, {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence])
        return self.pos

    def read(self, n=-1):
        n = self.size - self.pos if n is None or n < 0 else max(0, min(n, self.size - self.pos))
        self.raw.seek(self.start + self.pos)
        data = self.raw.read(n)
        self.pos += len(data)
        return data


def _payload(raw):
    """payload.zip inside the open archive `raw`: a window on its stored bytes."""
    import io
    import struct
    import zipfile
    info = zipfile.ZipFile(raw).getinfo("payload.zip")
    if info.compress_type != zipfile.ZIP_STORED:
        return io.BytesIO(zipfile.ZipFile(raw).read(info))
    raw.seek(info.header_offset)
    head = raw.read(30)   # the local file header: its name and extra field lengths end it
    name_length, extra_length = struct.unpack("<HH", head[26:30])
    return _Window(raw, info.header_offset + 30 + name_length + extra_length, info.compress_size)


def unpack(archive, folder, target, chosen):
    import py_compile
    import shutil
    import zipfile
    os.makedirs(folder, exist_ok=True)
    staging = os.path.join(folder, ".%s.%d.%s.tmp" % (os.path.basename(target), os.getpid(), os.urandom(4).hex()))
    os.mkdir(staging, 0o755)
    prefixes = tuple(WHEEL_FOLDER + name + "/" for name in chosen.values())
    try:
        with open(archive, "rb") as raw, zipfile.ZipFile(_payload(raw)) as inner:
            own = [info for info in inner.infolist() if info.filename.startswith(prefixes)]
            for info in own:
                info.filename = info.filename.split("/", 2)[2]   # _wheels/<wheel>/<path> -> <path>
            mine = set(info.filename for info in own)   # a picked wheel's own copy wins over the shared one
            for info in inner.infolist():
                if not info.filename.startswith(WHEEL_FOLDER) and info.filename not in mine:
                    inner.extract(info, staging)
            for info in own:
                inner.extract(info, staging)
        # Compiled now, once, with hashes that are never re-checked: the directory is named after
        # its content and never changes, and a read-only copy of it must not recompile every run.
        mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
        for place, _, files in os.walk(staging):
            for name in files:
                if name.endswith(".py"):
                    py_compile.compile(os.path.join(place, name), doraise=True, invalidation_mode=mode)
        try:
            os.rename(staging, target)
        except OSError:
            if not os.path.isdir(target):   # another process moved its copy into place first: use it
                raise
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
