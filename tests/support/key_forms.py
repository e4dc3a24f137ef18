"""The forms in which a secret must never appear in what hcmcp writes, and the check that scans
bytes for all of them (the secret-hygiene and team tests)."""

from __future__ import annotations

import base64
import json
import urllib.parse


def key_forms(key: str) -> list[bytes]:
    """The key as it must never appear: raw, its random part, JSON- and repr-escaped, URL-encoded
    (as is and every byte %XX), and base64 (standard and URL-safe, at each of the 3 alignments)."""
    raw = key.encode()
    forms = {
        raw,
        raw[4:],
        raw[:20],
        raw[-20:],
        json.dumps(key)[1:-1].encode(),
        repr(key)[1:-1].encode(),
        urllib.parse.quote(key, safe="").encode(),
        urllib.parse.quote_plus(key).encode(),
        "".join(f"%{b:02X}" for b in raw).encode(),
        "".join(f"%{b:02x}" for b in raw).encode(),
    }
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + raw)
            # Drop the characters that depend on the neighbouring bytes.
            forms.add(encoded[4:-4] if pad else encoded[:-4])
    return [form for form in forms if len(form) >= 12]


def assert_clean(data: bytes, key: str, where: str) -> None:
    for form in key_forms(key):
        assert form not in data, (
            f"the key appeared in {where} as {form!r}: ...{_around(data, form)}..."
        )


def _around(data: bytes, form: bytes) -> str:
    at = data.find(form)
    return data[max(0, at - 80) : at + len(form) + 80].decode("utf-8", "replace")
