"""``python tests/clocked_hcmcp.py ARGS``: hcmcp's own main, with the guard's two clocks moved forward
by the number of seconds in the file named by HCMCP_TEST_CLOCK_FILE (0 when absent or empty).

Expiry (a five-minute confirm_token, a ten-minute sealed requestState) can then be tested on a
real spawned server without waiting: the test writes "301" to the file. Only the clocks of the
token book and of the seal move; everything else in the process keeps real time.

(No tests here.)
"""

import os
import sys
import time


def _offset() -> float:
    try:
        with open(os.environ["HCMCP_TEST_CLOCK_FILE"]) as file:
            return float(file.read().strip() or 0)
    except (KeyError, OSError, ValueError):
        return 0.0


from hcmcp.protocol import seal  # noqa: E402
from hcmcp.tools import confirm  # noqa: E402

confirm.TOKENS.clock = lambda: time.time() + _offset()
_seal_init = seal.Seal.__init__


def _clocked_seal_init(self, key=None, *, clock=None, lifetime=seal.DEFAULT_LIFETIME):
    _seal_init(self, key, clock=lambda: time.time() + _offset(), lifetime=lifetime)


seal.Seal.__init__ = _clocked_seal_init

from hcmcp.__main__ import main  # noqa: E402

main(sys.argv[1:])
