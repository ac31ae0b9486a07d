#!/usr/bin/env bash
# Builds toxiproxy-server (and toxiproxy-cli) from the Go module github.com/Shopify/toxiproxy/v2 into
# .cache/bin once and prints the server's path: the regions lab (npm run lab:regions) and
# test/faults/regions.test.ts add the latency between simulated regions with it (this kernel has no
# netem). Without a Go of at least GO_MIN on PATH, the Go toolchain comes from the Go module proxy
# as in scripts/install-k6.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.5.0}"
GO_MIN="1.22"
GO_TOOLCHAIN="${GO_TOOLCHAIN:-go1.24.9}"
BIN="$PWD/.cache/bin/toxiproxy-server"
STAMP="$PWD/.cache/bin/.toxiproxy-${TOXIPROXY_VERSION}"
if [ -x "$BIN" ] && [ -f "$STAMP" ]; then
  echo "$BIN"
  exit 0
fi

# A Go of at least GO_MIN in $GO (scripts/go-toolchain.sh).
source scripts/go-toolchain.sh
echo "building toxiproxy ${TOXIPROXY_VERSION} from github.com/Shopify/toxiproxy/v2 into .cache/bin (once)" >&2
mkdir -p .cache/bin
GOTOOLCHAIN=local GOBIN="$PWD/.cache/bin" GOFLAGS=-mod=mod "$GO" install \
  "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}" >&2
mv -f "$PWD/.cache/bin/server" "$BIN"
rm -f "$PWD"/.cache/bin/.toxiproxy-*
touch "$STAMP"
echo "$BIN"
