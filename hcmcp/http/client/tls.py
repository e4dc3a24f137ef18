"""TLS for the instance: which certificates are trusted, and what a failed handshake means.

``ssl`` is imported only when the first https connection is made (start-up time):
nothing here imports it at module level.

Trust, in order:
* the system store, as OpenSSL finds it — which honours ``SSL_CERT_FILE`` (a PEM bundle)
  and ``SSL_CERT_DIR`` (a hashed directory): when set, they *replace* the default store,
  exactly as for curl built on OpenSSL;
* plus ``HEALTHCHECKS_CA_FILE``: a PEM bundle *added* for the instance's connections only;
* ``HEALTHCHECKS_INSECURE_TLS=true`` switches verification off, for the instance only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

# OpenSSL's X509_V_ERR_* codes that a person can do something about.
_EXPIRED = {10}  # CERT_HAS_EXPIRED
_NOT_YET_VALID = {9}  # CERT_NOT_YET_VALID
_UNKNOWN_CA = {2, 18, 19, 20, 21}  # no issuer, self-signed, untrusted chain
_NAME_MISMATCH = {62, 64}  # HOSTNAME_MISMATCH, IP_ADDRESS_MISMATCH

TRUST_FIX = (
    "If the instance uses a private or company CA, set HEALTHCHECKS_CA_FILE to that CA's certificate "
    "(a PEM file); SSL_CERT_FILE or SSL_CERT_DIR replace the whole trust store instead. "
    "HEALTHCHECKS_INSECURE_TLS=true switches verification off for the instance (a last resort: "
    "anyone on the path could then read the API key)."
)


@dataclass(frozen=True)
class TlsSettings:
    ca_file: str | None = None  # HEALTHCHECKS_CA_FILE: added to the trusted CAs
    insecure: bool = False  # HEALTHCHECKS_INSECURE_TLS: no verification at all

    def context(self) -> ssl.SSLContext:
        import ssl

        # the system store (SSL_CERT_FILE / SSL_CERT_DIR apply)
        context = ssl.create_default_context()
        if self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def check_ca_file(name: str, path: str) -> str | None:
    """Why ``path`` cannot serve as a PEM bundle, or None when it can (no ssl import)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1024 * 1024)
    except FileNotFoundError:
        return f"{name}={path!r}: no such file. Give the path of a PEM file holding the CA certificate(s)."
    except IsADirectoryError:
        return f"{name}={path!r} is a directory; give the path of a PEM file holding the CA certificate(s)."
    except OSError as exc:
        return f"{name}={path!r} cannot be read ({exc.strerror}); give a readable PEM file."
    if b"-----BEGIN CERTIFICATE-----" not in head:
        return (
            f"{name}={path!r} holds no PEM certificate (no -----BEGIN CERTIFICATE----- line); convert a DER "
            "file with: openssl x509 -inform der -in ca.der -out ca.pem"
        )
    return None


def failure_text(exc: BaseException, host: str, port: int) -> str:
    """A failed handshake with ``host``, as a sentence: which host, why, and which variable fixes it."""
    label = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    head = f"TLS handshake with {label} failed: "
    code = getattr(exc, "verify_code", None)
    message = getattr(exc, "verify_message", None) or ""
    if code in _EXPIRED:
        return (
            head + "certificate verify failed: the server's certificate has expired. Renew the "
            "certificate on the server; HEALTHCHECKS_INSECURE_TLS=true would switch verification "
            "off meanwhile (not recommended)."
        )
    if code in _NOT_YET_VALID:
        return (
            head
            + "certificate verify failed: the server's certificate is not valid yet. Check the clock "
            "of this machine and of the server."
        )
    if code in _UNKNOWN_CA:
        return (
            head
            + f"certificate verify failed: {message or 'unknown CA'} — the certificate is signed by a "
            f"certificate authority this server does not trust. {TRUST_FIX}"
        )
    if code in _NAME_MISMATCH:
        return (
            head + f"certificate verify failed: the certificate is not valid for the name {host}. "
            "HEALTHCHECKS_URL must use a name the certificate lists (its subject alternative names); a "
            "certificate for another name is also what an intercepting proxy presents."
        )
    if code is not None:
        return head + f"certificate verify failed: {message or f'error {code}'}. {TRUST_FIX}"
    reason = str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)
    if "WRONG_VERSION_NUMBER" in reason.upper():
        return (
            head
            + "the server did not answer in TLS (wrong version number). If the instance serves plain "
            "http on this port, HEALTHCHECKS_URL must start with http://."
        )
    short = reason
    if short.startswith("[") and "] " in short:
        short = short.split("] ", 1)[1]
    if " (_ssl.c:" in short:
        short = short.rsplit(" (_ssl.c:", 1)[0]
    return head + f"{short or type(exc).__name__}."
