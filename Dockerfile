# hcmcp as a container: the single-file build (dist/hcmcp.pyz) on a distroless Python, unpacked
# while building so that the image runs read-only, as a user who owns nothing, with no shell.
#
#   .ci/build-pyz                      # dist/hcmcp.pyz and its SBOM dist/hcmcp.cdx.json, from the lock file
#   docker build -t hcmcp .            # copies those in: the build itself needs no network
#   docker run -i --rm -e HEALTHCHECKS_API_KEY hcmcp                       # stdio (what a client launches)
#   docker run --rm -p 127.0.0.1:8000:8000 -e HEALTHCHECKS_API_KEY -e HEALTHCHECKS_HTTP_TOKEN \
#       hcmcp --http 0.0.0.0:8000                                          # Streamable HTTP on 127.0.0.1:8000/mcp
#   docker run -i --rm hcmcp --demo                                        # the built-in simulated instance
#
# Architectures: linux/amd64, linux/arm64. The .pyz carries the native modules of both (and more), and
# the build picks the base's own with the base's own python3, so for arm64 the file builds unchanged:
#   docker build --platform linux/arm64 -t hcmcp .   # (an arm64 machine, or binfmt/qemu for the RUN steps)
# CI replays these steps in an arm64 Debian root under qemu (tests/test_pyz_arm64.py).
#
# Off loopback --http refuses to start without HEALTHCHECKS_HTTP_TOKEN (README.md, "Streamable HTTP").
# Both stages are the same image: the files compiled in the first are exactly the ones the second's
# interpreter loads, and neither needs a shell (every RUN is exec form). CI builds this file with
# podman and a local Debian 12 stand-in for BASE (.ci/build-image; docs/container.md).
#
# BASE is pinned by digest. This digest was taken from public Dockerfiles that pin the same tag (two
# unrelated projects, late 2024); no registry is reachable from where it was written, so it was NOT
# checked against gcr.io and is probably not the newest. Refresh it with either of
#   podman pull gcr.io/distroless/python3-debian12:nonroot \
#     && podman image inspect --format '{{index .RepoDigests 0}}' gcr.io/distroless/python3-debian12:nonroot
#   crane digest gcr.io/distroless/python3-debian12:nonroot
# and keep it a CPython 3.11 to 3.14 at /usr/bin/python3 (what the .pyz carries native modules for). Pin
# the digest of the image index (what `crane digest` and RepoDigests give), not of one architecture's
# manifest, so that --platform picks the amd64 or the arm64 image from it.
ARG BASE=gcr.io/distroless/python3-debian12:nonroot@sha256:17b27c84c985a53d0cd2adef4f196ca327fa9b6755369be605cf45533b4e700b

FROM ${BASE} AS build
USER 0:0
COPY LICENSE dist/hcmcp.pyz dist/hcmcp.cdx.json /opt/hcmcp/
# The payload is unpacked and compiled into /opt/hcmcp/cache here, once, so the running container
# never writes; then everything is made readable by all and writable by none.
ENV HCMCP_PYZ_CACHE=/opt/hcmcp/cache
RUN ["/usr/bin/python3", "-I", "/opt/hcmcp/hcmcp.pyz", "--version"]
RUN ["/usr/bin/python3", "-I", "-c", "import os\nfor d, subdirs, files in os.walk('/opt/hcmcp'):\n    os.chmod(d, 0o555)\n    for f in files:\n        p = os.path.join(d, f)\n        os.chmod(p, 0o555 if os.access(p, os.X_OK) else 0o444)"]

FROM ${BASE}
LABEL org.opencontainers.image.title="hcmcp" \
      org.opencontainers.image.description="MCP server for Healthchecks.io and self-hosted Healthchecks" \
      org.opencontainers.image.licenses="BSD-3-Clause" \
      io.modelcontextprotocol.server.name="io.github.hcmcp/hcmcp"
COPY --from=build /opt/hcmcp /opt/hcmcp
ENV HCMCP_PYZ_CACHE=/opt/hcmcp/cache
USER 65532:65532
WORKDIR /
EXPOSE 8000
ENTRYPOINT ["/usr/bin/python3", "-I", "/opt/hcmcp/hcmcp.pyz"]
