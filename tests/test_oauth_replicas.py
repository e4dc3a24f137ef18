"""Two `hcmcp --http` replicas with HEALTHCHECKS_KEY_SOURCE=oauth behind a real nginx over TLS,
configured by exactly the block under the `hcmcp-oauth-nginx-config` marker in docs/oauth.md (only the
replica addresses, the listen port, the certificate and the log path replaced; the certificate is
signed by a throw-away CA made with the openssl CLI). The replicas share HEALTHCHECKS_STATE_KEY and
HEALTHCHECKS_HTTP_PUBLIC_URL (nginx's https origin).

A client registers, the sign-in form is fetched and posted, the code exchanged and the token used,
all through nginx, which sends the stateless requests round-robin: nginx's access log
($upstream_addr) shows that both replicas served, and that a token issued by one replica was
accepted by the other. The refresh token rotates across replicas too. Then the same token, sent to
each replica directly, is accepted by both; a refresh token replayed is refused by the replica that
rotated it and accepted once by the other (the documented limit: no shared storage); a replica with
another state key accepts none of them. Last, the Python SDK's OAuth client in a 2025-era session
signs in through the same block over https and its session stays on one replica.
"""

from __future__ import annotations

import os
import shutil
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from deploy_support import make_pki
from support.nginx import Proxy, documented_block, free_port, nginx
from support.oauth import (
    approve_by_form,
    authorization,
    call_tool,
    check_names,
    exchange,
    project_names,
    refresh,
)
from support.oauth_flow import serve_oauth
from support.sdk_oauth import Memory, Person, names, provider
from support.served import Served
from system_servers import require

MARKER = "<!-- hcmcp-oauth-nginx-config:"
# What the documented block names, and how often: the test replaces these and nothing else.
PLACEHOLDERS = {
    "server hcmcp-1:8000;": 2,
    "server hcmcp-2:8000;": 2,
    "listen 443 ssl;": 1,
    "/etc/letsencrypt/live/mcp.example.com/fullchain.pem": 1,
    "/etc/letsencrypt/live/mcp.example.com/privkey.pem": 1,
    "/var/log/nginx/hcmcp-oauth.access.log": 1,
}
CALLBACK = "http://127.0.0.1:9/callback"  # never followed: the test reads the redirect's Location
NOBODY = 65534


@pytest.fixture(scope="module", autouse=True)
def nginx_binary() -> str:
    """nginx on PATH, first of all (before any replica starts): else one skip line, or a failure under CI=true."""
    return require("nginx", apt="nginx")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    made = make_pki(tmp_path_factory.mktemp("pki"))
    made.pair = made.leaf("nginx", "IP:127.0.0.1,DNS:localhost")
    return made


def localised(config: str, replicas: list[int], port: int, folder: Path, log: Path, pki) -> str:
    for placeholder, count in PLACEHOLDERS.items():
        assert config.count(placeholder) == count, (
            f"docs/oauth.md's nginx block: expected {placeholder!r} x{count}"
        )
    cert, key = folder / "cert.pem", folder / "key.pem"
    shutil.copy(pki.pair[0], cert)
    shutil.copy(pki.pair[1], key)
    if os.geteuid() == 0:  # nginx runs as nobody
        for each in (cert, key):
            os.chown(each, NOBODY, NOBODY)
    config = config.replace("server hcmcp-1:8000;", f"server 127.0.0.1:{replicas[0]};")
    config = config.replace("server hcmcp-2:8000;", f"server 127.0.0.1:{replicas[1]};")
    config = config.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    config = config.replace("/etc/letsencrypt/live/mcp.example.com/fullchain.pem", str(cert))
    config = config.replace("/etc/letsencrypt/live/mcp.example.com/privkey.pem", str(key))
    config = config.replace("/var/log/nginx/hcmcp-oauth.access.log", str(log))
    assert "hcmcp-1" not in config and "hcmcp-2" not in config
    return config


@dataclass
class Deployment:
    """Two replicas sharing the state key and the public URL, behind the documented nginx."""

    port: int  # nginx's
    public: str  # https://127.0.0.1:<port>
    tls: ssl.SSLContext  # trusts the throw-away CA
    replicas: list[Served]
    proxy: Proxy  # its access log is read once nginx has stopped


@contextmanager
def deployment(simulator, nginx_binary: str, pki) -> Iterator[Deployment]:
    port = free_port()
    public = f"https://127.0.0.1:{port}"
    block = documented_block("oauth.md", MARKER)
    with (
        serve_oauth(simulator.url, HEALTHCHECKS_HTTP_PUBLIC_URL=public) as one,
        serve_oauth(simulator.url, HEALTHCHECKS_HTTP_PUBLIC_URL=public) as two,
    ):
        ports = [one.port, two.port]
        with nginx(
            nginx_binary, lambda folder, log: localised(block, ports, port, folder, log, pki), port
        ) as proxy:
            tls = ssl.create_default_context(cafile=str(pki.ca))
            yield Deployment(port, public, tls, [one, two], proxy)
        assert one.stop() == 0 and two.stop() == 0


def test_a_token_issued_by_one_replica_is_accepted_by_the_other(simulator, nginx_binary, pki):
    project_a = project_names(simulator.url, simulator.keys["RW_KEY"])
    with deployment(simulator, nginx_binary, pki) as at:
        port, tls = at.port, at.tls
        auth = authorization(at.public, port, CALLBACK, "replica test", tls)
        answer = approve_by_form(port, auth.path, CALLBACK, simulator.keys["RW_KEY"], tls)
        assert answer.get("state") == auth.state and "code" in answer, answer
        tokens = exchange(port, auth, answer["code"], tls)
        for _ in range(4):  # round-robin: two on each replica
            assert check_names(port, tokens["access_token"], tls) == project_a
        status, renewed = refresh(port, auth, tokens["refresh_token"], tls)
        assert status == 200, renewed
        for _ in range(2):
            assert check_names(port, renewed["access_token"], tls) == project_a
        # each replica directly: both accept the token, neither needs the other
        for served in at.replicas:
            assert check_names(served.port, renewed["access_token"]) == project_a
        # The refresh token given up, replayed at each replica directly: the one that rotated it
        # refuses it; the other, which shares no storage, accepts it once (docs/oauth.md, Limits:
        # single use is per replica), and then it is spent everywhere.
        for expected in ([200, 400], [400, 400]):
            replays = [refresh(r.port, auth, tokens["refresh_token"])[0] for r in at.replicas]
            assert sorted(replays) == expected, replays

    proxy = at.proxy
    upstreams = {f"127.0.0.1:{r.port}" for r in at.replicas}
    served_mcp = [line for line in proxy.log if line["request"] == "POST /mcp"]
    assert len(served_mcp) == 6 and all(line["status"] == "200" for line in served_mcp), proxy.log
    assert {line["upstream"] for line in served_mcp} == upstreams, served_mcp
    issued = [line for line in proxy.log if line["request"] == "POST /oauth/token"]
    assert issued[0]["status"] == "200", issued
    other = (upstreams - {issued[0]["upstream"]}).pop()
    # the access token from the first /oauth/token answer, accepted by the replica that did not issue it
    assert any(line["upstream"] == other for line in served_mcp[:4]), proxy.log
    # every OAuth step was served by the replicas between them, and both took part
    oauth = [line for line in proxy.log if line["request"].split()[1].startswith("/oauth/")]
    assert {line["upstream"] for line in oauth} == upstreams, oauth
    # nothing secret in nginx's log
    text = repr(proxy.log)
    for secret in (tokens["access_token"], tokens["refresh_token"], answer["code"]):
        assert secret not in text


def test_a_replica_with_another_state_key_accepts_none_of_the_tokens(simulator):
    project_a = project_names(simulator.url, simulator.keys["RW_KEY"])
    with serve_oauth(simulator.url) as issuer:
        public = f"http://127.0.0.1:{issuer.port}"
        # the same public origin (so the same resource), another state key
        stranger = serve_oauth(simulator.url, "ab" * 32, HEALTHCHECKS_HTTP_PUBLIC_URL=public)
        auth = authorization(public, issuer.port, CALLBACK, "stranger test")
        answer = approve_by_form(issuer.port, auth.path, CALLBACK, simulator.keys["RW_KEY"])
        tokens = exchange(issuer.port, auth, answer["code"])
        with stranger:
            status, head, _ = call_tool(stranger.port, tokens["access_token"])
            assert status == 401 and head["www-authenticate"].startswith("Bearer "), head
            assert 'error="invalid_token"' in head["www-authenticate"], head
            status, refused = refresh(stranger.port, auth, tokens["refresh_token"])
            # its client_id was sealed with the other key too: the client is not one it knows
            assert (status, refused.get("error")) == (401, "invalid_client"), refused
            assert stranger.stop() == 0
        assert check_names(issuer.port, tokens["access_token"]) == project_a
        assert issuer.stop() == 0


def test_the_python_sdk_in_a_2025_session_signs_in_through_nginx_and_stays_on_one_replica(
    simulator, nginx_binary, pki
):
    """The Python SDK's OAuth client over https through the documented block, in a 2025-era
    session (legacy mode): discovery, registration, the sign-in form and the token all go
    through nginx; the session's requests stay on one replica (the block's sticky upstream)."""
    key = simulator.keys["OTHER_RW_KEY"]
    with deployment(simulator, nginx_binary, pki) as at:
        storage = Memory()

        def by_form(url: str) -> dict[str, str]:
            parts = urlsplit(url)
            assert f"{parts.scheme}://{parts.netloc}" == at.public, url
            return approve_by_form(at.port, f"{parts.path}?{parts.query}", CALLBACK, key, at.tls)

        person = Person(by_form)
        client = provider(f"{at.public}/mcp", CALLBACK, "hcmcp SDK via nginx", storage, person)
        seen = anyio.run(partial(names, f"{at.public}/mcp", client, "legacy", at.tls))
        assert seen == project_names(simulator.url, key)
        assert len(person.visits) == 1 and len(storage.tokens) == 1

    proxy = at.proxy
    session = [
        line for line in proxy.log if line["request"] == "POST /mcp" and line["status"] == "200"
    ]
    assert session and {line["version"] for line in session} <= {"", "-", "2025-11-25"}, session
    assert len({line["upstream"] for line in session}) == 1, session
    assert any(line["request"] == "POST /oauth/token" for line in proxy.log), proxy.log
