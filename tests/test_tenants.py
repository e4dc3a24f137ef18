"""The tenant fingerprint: stable, distinct per credential, never the credential."""

from hcmcp.protocol.tenants import fingerprint

KEY_A = "a" * 32
KEY_B = "b" * 31 + "c"


def test_a_fingerprint_is_stable_and_sixteen_hex_digits():
    assert fingerprint(KEY_A) == fingerprint(KEY_A)
    assert len(fingerprint(KEY_A)) == 16
    int(fingerprint(KEY_A), 16)


def test_two_credentials_have_two_fingerprints_and_neither_holds_its_key():
    assert fingerprint(KEY_A) != fingerprint(KEY_B)
    for key in (KEY_A, KEY_B):
        assert key[:8] not in fingerprint(key)


def test_the_fingerprint_is_domain_separated_from_a_plain_hash_of_the_key():
    import hashlib

    assert fingerprint(KEY_A) != hashlib.sha256(KEY_A.encode()).hexdigest()[:16]
