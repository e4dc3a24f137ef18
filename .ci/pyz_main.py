# The loader of hcmcp.pyz: its __main__.py, written by .ci/build-pyz from this template.
#
# The archive holds three members: this file, pyz_unpack.py (.ci/pyz_unpack.py: what only the first
# run needs) and payload.zip (our code and the wheels of our dependencies, unpacked). Native
# extensions (orjson, msgspec) cannot be imported from a zip, so the first run unpacks the payload,
# with the native modules that fit this interpreter, into a cache directory named after the
# payload's content hash and the interpreter (pyz_unpack.py says how it picks them, and refuses a
# platform it has none for), compiles it, and moves it into place with one rename: a process either
# sees the whole directory or none of it. Every later run only checks that the directory exists and
# imports from it as from an installed package: this file stays small, since it is compiled on every
# run. Where the cache is, and why, is in README.md ("The single file") and DESIGN.md.
#
# This file must stay readable by older interpreters (no syntax newer than 3.6) so that it can
# say which Python it needs instead of failing with a SyntaxError.

import os
import sys

VERSION = "@VERSION@"
HASH = "@HASH@"

CACHE_VARIABLE = "HCMCP_PYZ_CACHE"


def _stop(message):
    sys.stderr.write("hcmcp.pyz: " + message + "\n")
    raise SystemExit(1)


def _machine():
    return os.uname().machine if hasattr(os, "uname") else os.environ.get("PROCESSOR_ARCHITECTURE", "")


def _interpreter_key():
    """The cache directory's name for this interpreter's native modules: its extension suffix (which
    names the ABI, and on Linux the machine and libc) and the machine; cheap, for every run."""
    import _imp
    suffix = _imp.extension_suffixes()[0].strip(".")
    key = suffix.rsplit(".", 1)[0] if suffix.endswith((".so", ".pyd")) else suffix
    machine = _machine().lower()
    if machine and machine not in key:
        key += "-" + machine
    return key.replace(os.sep, "_").replace("/", "_")


def _check_interpreter():
    if sys.version_info < (3, 11):
        _stop("needs Python 3.11 or newer; %s is %d.%d" % (sys.executable, sys.version_info[0], sys.version_info[1]))


def _private(path):
    """Create or accept a directory that only we can write: in a shared temporary directory another
    user could otherwise have put code there for us to run."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not hasattr(os, "getuid"):   # Windows: the folder is under the user's own %TEMP%
        return (info.st_mode & 0o170000) == 0o040000
    return (info.st_mode & 0o170000) == 0o040000 and info.st_uid == os.getuid() and not info.st_mode & 0o022


def _candidates():
    """(root, must be private) for each place the payload may be unpacked, in order."""
    explicit = os.environ.get(CACHE_VARIABLE)
    if explicit:
        return [(explicit, False)]
    roots = []
    xdg, home, local = os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"), os.environ.get("LOCALAPPDATA")
    if xdg and os.path.isabs(xdg):
        roots.append((os.path.join(xdg, "hcmcp", "pyz"), False))
    elif sys.platform == "win32" and local and os.path.isabs(local):
        roots.append((os.path.join(local, "hcmcp", "pyz"), False))
    elif home and os.path.isabs(home):
        roots.append((os.path.join(home, ".cache", "hcmcp", "pyz"), False))
    if hasattr(os, "getuid"):
        tmp = os.environ.get("TMPDIR") or "/tmp"
        roots.append((os.path.join(tmp, "hcmcp-%d" % os.getuid(), "pyz"), True))
    else:
        import tempfile
        roots.append((os.path.join(tempfile.gettempdir(), "hcmcp", "pyz"), True))
    return roots


def _unpacked():
    """The directory holding the unpacked payload for this interpreter: found, or made now."""
    key = _interpreter_key()
    tried, chosen = [], None
    for root, private in _candidates():
        target = os.path.join(root, HASH, key)
        try:
            if private and not _private(os.path.dirname(root)):
                tried.append(os.path.dirname(root) + " (not a directory of this user's alone)")
                continue
            if os.path.isdir(target):
                return target
            if chosen is None:
                import pyz_unpack   # from this archive: only the first run needs it
                chosen = pyz_unpack.selection()
            pyz_unpack.unpack(__loader__.archive, os.path.join(root, HASH), target, chosen)
            return target
        except OSError as error:
            tried.append("%s (%s)" % (root, error.strerror or error))
    if os.environ.get(CACHE_VARIABLE):
        _stop("cannot unpack into %s=%s: %s; set it to a directory this user can write, or unset it"
              % (CACHE_VARIABLE, os.environ[CACHE_VARIABLE], tried[0]))
    _stop("found no directory to unpack its native modules into (tried %s); set %s to a writable directory"
          % ("; ".join(tried), CACHE_VARIABLE))


def _run():
    _check_interpreter()
    archive = __loader__.archive
    sys.path[:] = [_unpacked()] + [entry for entry in sys.path if entry != archive]
    from hcmcp.__main__ import main
    main()


if __name__ == "__main__":
    _run()
