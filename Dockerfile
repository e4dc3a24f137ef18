# hcmcp as a container: the single-file build (dist/hcmcp.pyz) on a distroless Python, unpacked
# while building so that the image runs read-only, as a user who owns nothing, with no shell.
#
#   docker build -t hcmcp .
#   docker run -i --rm -e HEALTHCHECKS_API_KEY hcmcp                       # stdio (what a client launches)
#   docker run --rm -p 8000:8000 -e HEALTHCHECKS_API_KEY -e HEALTHCHECKS_HTTP_TOKEN \
#       hcmcp --http 0.0.0.0:8000                                          # Streamable HTTP on :8000/mcp
#   docker run -i --rm hcmcp --demo                                        # the built-in simulated instance
#
# Off loopback --http refuses to start without HEALTHCHECKS_HTTP_TOKEN (README.md, "Streamable HTTP").
# Both stages are Debian 12 with CPython 3.11: the wheels and the compiled files made in the first
# are the ones the second's interpreter loads.

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml LICENSE ./
COPY .ci/build-pyz .ci/pyz_main.py .ci/
COPY hcmcp/ hcmcp/
# The wheels come from the package registry; the payload is unpacked and compiled into
# /opt/hcmcp/cache here, once, so the running container never writes.
RUN python3 .ci/build-pyz --python host --output /opt/hcmcp/hcmcp.pyz \
 && HCMCP_PYZ_CACHE=/opt/hcmcp/cache python3 -I /opt/hcmcp/hcmcp.pyz --version \
 && cp LICENSE /opt/hcmcp/ \
 && chmod -R a+rX,go-w /opt/hcmcp

FROM gcr.io/distroless/python3-debian12:nonroot
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
