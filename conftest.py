"""Lets tests/ and conformance/ share tests/support.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests"))
