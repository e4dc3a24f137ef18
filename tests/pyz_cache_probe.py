"""A test session of its own, run by tests/test_pyz_cache_check.py (pytest collects this file only when
named: it does not match test_*.py). It runs a .pyz with an environment made up from scratch, HOME
and PATH only, as the SDK's StdioServerParameters made it before issue 28, so that it unpacks into
$HOME/.cache/hcmcp/pyz. Which .pyz, HCMCP_CACHE_PROBE says: ``made-up-env``, tests/pyz_build.py's;
``server-cmd``, the one HCMCP_SERVER_CMD names (.ci/run's second pass), without pyz_build knowing of it.
(tests/test_e2e_mcp_client.py shows that a spawn given the session's HCMCP_PYZ_CACHE leaves nothing.)"""

import os
import subprocess
import sys

from pyz_build import built_pyz
from support import HCMCP


def test_probe():
    mode = os.environ["HCMCP_CACHE_PROBE"]
    assert mode in ("made-up-env", "server-cmd"), mode
    command = HCMCP if mode == "server-cmd" else [sys.executable, "-I", str(built_pyz())]
    done = subprocess.run(
        [*command, "--version"],
        env={"HOME": os.environ["HOME"], "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
