"""Private CAs and TLS, through the real stdio transport: a throw-away CA made with the openssl CLI, a TLS
front on 127.0.0.1 for the simulator, and each way a handshake fails, with the text a person acts on."""

from __future__ import annotations

import subprocess

import pytest

from deploy_support import (
    LoopbackProxy,
    TlsFront,
    call,
    hcmcp,
    hcmcp_env,
    make_pki,
    seeded,
    simulator_thread,
)
from hcmcp.config.parse import ConfigError
from hcmcp.config.settings import load
from support import HCMCP, ROOT


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    pki.good = pki.leaf("good", "IP:127.0.0.1,DNS:localhost")
    pki.expired = pki.leaf(
        "expired", "IP:127.0.0.1", start="20200101000000Z", end="20200102000000Z"
    )
    pki.other_name = pki.leaf("other", "DNS:other.example")
    return pki


@pytest.fixture(scope="module")
def instance():
    with simulator_thread(seeded()) as url:
        yield int(url.rsplit(":", 1)[1])


def first_call(env: dict[str, str], name: str = "list_checks") -> tuple[dict, str]:
    with hcmcp(env) as peer:
        result = call(peer, name, {})
        peer.close()
        return result, peer.stderr_text()


def front(pki, which, instance):
    cert, key = getattr(pki, which)
    return TlsFront(cert, key, instance)


def test_a_private_ca_added_for_the_instance(pki, instance):
    with front(pki, "good", instance) as tls:
        result, stderr = first_call(
            hcmcp_env(f"https://127.0.0.1:{tls.port}", HEALTHCHECKS_CA_FILE=str(pki.ca))
        )
    assert not result.get("isError"), result
    assert result["structuredContent"]["checks"] and stderr == ""


def test_without_the_ca_the_error_names_the_host_the_reason_and_the_variable(pki, instance):
    with front(pki, "good", instance) as tls:
        result, _ = first_call(hcmcp_env(f"https://127.0.0.1:{tls.port}"))
    text = result["content"][0]["text"]
    assert result.get("isError") and f"TLS handshake with 127.0.0.1:{tls.port} failed" in text
    assert "does not trust" in text and "HEALTHCHECKS_CA_FILE" in text, text


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_ssl_cert_file_and_dir_are_honoured(pki, instance, variable, tmp_path):
    if variable == "SSL_CERT_FILE":
        value = str(pki.ca)
    else:
        (tmp_path / "ca.pem").write_bytes(pki.ca.read_bytes())
        subprocess.run(
            ["openssl", "rehash", str(tmp_path)], check=True, capture_output=True, timeout=60
        )
        value = str(tmp_path)
    with front(pki, "good", instance) as tls:
        result, _ = first_call(hcmcp_env(f"https://127.0.0.1:{tls.port}", **{variable: value}))
    assert not result.get("isError"), result


def test_an_expired_certificate(pki, instance):
    with front(pki, "expired", instance) as tls:
        result, _ = first_call(
            hcmcp_env(f"https://127.0.0.1:{tls.port}", HEALTHCHECKS_CA_FILE=str(pki.ca))
        )
    text = result["content"][0]["text"]
    assert result.get("isError") and f"127.0.0.1:{tls.port}" in text and "has expired" in text, text


def test_a_certificate_for_another_name(pki, instance):
    with front(pki, "other_name", instance) as tls:
        result, _ = first_call(
            hcmcp_env(f"https://127.0.0.1:{tls.port}", HEALTHCHECKS_CA_FILE=str(pki.ca))
        )
    text = result["content"][0]["text"]
    assert (
        result.get("isError")
        and "not valid for the name 127.0.0.1" in text
        and "HEALTHCHECKS_URL" in text
    )


def test_an_expired_certificate_through_the_proxy_says_both(pki, instance):
    with front(pki, "expired", instance) as tls, LoopbackProxy() as proxy:
        env = hcmcp_env(
            f"https://127.0.0.1:{tls.port}",
            HEALTHCHECKS_CA_FILE=str(pki.ca),
            https_proxy=proxy.url(),
        )
        result, _ = first_call(env)
    text = result["content"][0]["text"]
    assert (
        result.get("isError") and "has expired" in text and f"http://127.0.0.1:{proxy.port}" in text
    ), text
    assert [s.method for s in proxy.seen] == ["CONNECT"]


def test_insecure_tls_verifies_nothing_for_the_instance_and_warns_once(pki, instance):
    with front(pki, "other_name", instance) as tls:  # wrong name and no CA: both ignored
        result, stderr = first_call(
            hcmcp_env(f"https://127.0.0.1:{tls.port}", HEALTHCHECKS_INSECURE_TLS="true")
        )
    assert not result.get("isError"), result
    lines = [line for line in stderr.splitlines() if line]
    assert (
        len(lines) == 1
        and "HEALTHCHECKS_INSECURE_TLS=true" in lines[0]
        and "not verified" in lines[0]
    )


@pytest.mark.parametrize(
    "env, words",
    [
        ({"HEALTHCHECKS_INSECURE_TLS": "yes"}, ["HEALTHCHECKS_INSECURE_TLS", "true", "false"]),
        ({"HEALTHCHECKS_INSECURE_TLS": "1"}, ["HEALTHCHECKS_INSECURE_TLS", "true", "false"]),
        ({"HEALTHCHECKS_CA_FILE": "/nonexistent/ca.pem"}, ["HEALTHCHECKS_CA_FILE", "no such file"]),
        ({"HEALTHCHECKS_CA_FILE": "/etc/hostname"}, ["HEALTHCHECKS_CA_FILE", "no PEM certificate"]),
        ({"HEALTHCHECKS_CA_FILE": ""}, ["HEALTHCHECKS_CA_FILE", "empty"]),
        ({"SSL_CERT_FILE": "/nonexistent/bundle.pem"}, ["SSL_CERT_FILE", "no such file"]),
        ({"SSL_CERT_DIR": "/nonexistent/certs"}, ["SSL_CERT_DIR", "no such directory"]),
    ],
)
def test_unusable_tls_settings_are_refused_naming_the_variable(env, words):
    with pytest.raises(ConfigError) as error:
        load({"HEALTHCHECKS_URL": "https://hc.example.com", **env})
    for word in words:
        assert word in str(error.value), error.value


def test_an_unusable_tls_setting_stops_the_server_with_exit_1():
    full = hcmcp_env("https://hc.example.com", HEALTHCHECKS_CA_FILE="/nonexistent/ca.pem")
    proc = subprocess.run(HCMCP, env=full, input=b"", capture_output=True, cwd=ROOT, timeout=30)
    assert proc.returncode == 1 and proc.stdout == b"" and b"HEALTHCHECKS_CA_FILE" in proc.stderr


def imported(stderr: str) -> list[str]:
    return [
        line.rsplit("|", 1)[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    ]


def test_ssl_is_imported_only_by_the_first_call(pki, instance):
    # Before the first reply nothing imports ssl: tests/test_fast_start.py checks the modules loaded
    # at the moment the handshake's first byte is written (an https URL included). After that reply a
    # background thread warms the server up (asyncio brings ssl with it), so an import list taken at
    # EOF no longer says what start-up cost; what a call must add is checked here.
    argv = [HCMCP[0], "-X", "importtime", "-m", "hcmcp"]
    with front(pki, "good", instance) as tls:
        env = hcmcp_env(f"https://127.0.0.1:{tls.port}", HEALTHCHECKS_CA_FILE=str(pki.ca))
        with hcmcp(env, argv=argv) as peer:  # the handshake, tools/list and one call
            peer.request("tools/list")
            result = call(peer, "list_checks", {})
            peer.close()
            with_a_call = imported(peer.stderr_text())
    assert (
        not result.get("isError")
        and "ssl" in with_a_call
        and "hcmcp.http.client.tls" in with_a_call
    )
