"""Who a request speaks for, without holding on to the credential.

A tenant is named by the fingerprint of the credential its caller brought (a Healthchecks API key,
for this server): a domain-separated SHA-256, cut to 16 hex digits. It is stable across processes
and replicas (so a confirm token or a session can be bound to it), it names no key, and it is what
sessions, slots, metrics and log lines use wherever a key would otherwise appear. A credential of
32 random characters cannot be found back from it.
"""

from __future__ import annotations

_DOMAIN = b"hcmcp tenant v1\x00"


def fingerprint(credential: str) -> str:
    """The tenant's name for ``credential``: 16 lowercase hex digits."""
    import hashlib  # imported here: nothing on the start-up path needs it

    return hashlib.sha256(_DOMAIN + credential.encode("utf-8", "surrogatepass")).hexdigest()[:16]
