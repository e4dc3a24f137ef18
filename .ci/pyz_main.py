# The loader of hcmcp.pyz: its __main__.py, written by .ci/build-pyz from this template.
#
# The archive holds two members: this file and payload.zip (our code and the wheels of our
# dependencies, unpacked). Native extensions (orjson, msgspec) cannot be imported from a zip, so
# the payload is unpacked once into a cache directory named after its content hash, compiled,
# and moved into place with one rename: a process either sees the whole directory or none of it.
# Every later run only checks that the directory exists and imports from it as from an
# installed package. Where the cache is, and why, is in README.md ("The single file") and
# DESIGN.md. Only what runs on the later runs' path is imported at the top.
#
# This file must stay readable by older interpreters (no syntax newer than 3.6) so that it can
# say which Python it needs instead of failing with a SyntaxError.

import os
import sys

VERSION = "@VERSION@"
HASH = "@HASH@"
SUFFIXES = @SUFFIXES@      # the extension-module suffixes the payload has native modules for
BUILT_FOR = "@BUILT_FOR@"  # the same, for a person: "CPython 3.11, 3.12 on linux x86_64"
PLATFORM = "@PLATFORM@"    # sys.platform and machine the wheels were chosen for

CACHE_VARIABLE = "HCMCP_PYZ_CACHE"


def _stop(message):
    sys.stderr.write("hcmcp.pyz: " + message + "\n")
    raise SystemExit(1)


def _check_interpreter():
    if sys.version_info < (3, 11):
        _stop("needs Python 3.11 or newer; %s is %d.%d" % (sys.executable, sys.version_info[0], sys.version_info[1]))
    import _imp
    here = "%s %s" % (sys.platform, os.uname().machine)
    if here != PLATFORM or not any(suffix in SUFFIXES for suffix in _imp.extension_suffixes()):
        _stop("this file carries native modules for %s; %s is %s %d.%d on %s: build one for it with "
              ".ci/build-pyz (see README.md)" % (BUILT_FOR, sys.executable, sys.implementation.name,
                                                 sys.version_info[0], sys.version_info[1], here))


def _private(path):
    """Create or accept a directory that only we can write: in a shared temporary directory another
    user could otherwise have put code there for us to run."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    return (info.st_mode & 0o170000) == 0o040000 and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _candidates():
    """(root, must be private) for each place the payload may be unpacked, in order."""
    explicit = os.environ.get(CACHE_VARIABLE)
    if explicit:
        return [(explicit, False)]
    roots = []
    xdg, home = os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME")
    if xdg and os.path.isabs(xdg):
        roots.append((os.path.join(xdg, "hcmcp", "pyz"), False))
    elif home and os.path.isabs(home):
        roots.append((os.path.join(home, ".cache", "hcmcp", "pyz"), False))
    tmp = os.environ.get("TMPDIR") or "/tmp"
    roots.append((os.path.join(tmp, "hcmcp-%d" % os.getuid(), "pyz"), True))
    return roots


def _unpacked():
    """The directory holding the unpacked payload: found, or made now."""
    tried = []
    for root, private in _candidates():
        target = os.path.join(root, HASH)
        try:
            if private and not _private(os.path.dirname(root)):
                tried.append(os.path.dirname(root) + " (not a directory of this user's alone)")
                continue
            if os.path.isdir(target):
                return target
            _unpack(root, target)
            return target
        except OSError as error:
            tried.append("%s (%s)" % (root, error.strerror or error))
    if os.environ.get(CACHE_VARIABLE):
        _stop("cannot unpack into %s=%s: %s; set it to a directory this user can write, or unset it"
              % (CACHE_VARIABLE, os.environ[CACHE_VARIABLE], tried[0]))
    _stop("found no directory to unpack its native modules into (tried %s); set %s to a writable directory"
          % ("; ".join(tried), CACHE_VARIABLE))


def _unpack(root, target):
    import io
    import py_compile
    import shutil
    import zipfile
    os.makedirs(root, exist_ok=True)
    staging = os.path.join(root, ".%s.%d.%s.tmp" % (HASH, os.getpid(), os.urandom(4).hex()))
    os.mkdir(staging, 0o755)
    try:
        with zipfile.ZipFile(__loader__.archive) as outer:
            payload = outer.read("payload.zip")
        with zipfile.ZipFile(io.BytesIO(payload)) as inner:
            inner.extractall(staging)
        # Compiled now, once, with hashes that are never re-checked: the directory is named after
        # its content and never changes, and a read-only copy of it must not recompile every run.
        mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
        for folder, _, files in os.walk(staging):
            for name in files:
                if name.endswith(".py"):
                    py_compile.compile(os.path.join(folder, name), doraise=True, invalidation_mode=mode)
        try:
            os.rename(staging, target)
        except OSError:
            if not os.path.isdir(target):   # another process moved its copy into place first: use it
                raise
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


def _run():
    _check_interpreter()
    archive = __loader__.archive
    sys.path[:] = [_unpacked()] + [entry for entry in sys.path if entry != archive]
    from hcmcp.__main__ import main
    main()


if __name__ == "__main__":
    _run()
