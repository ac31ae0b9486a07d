#!/usr/bin/env bash
# Builds k6 from its Go module into .cache/bin once (no prebuilt download needed) and prints its path.
# Without a Go of at least GO_MIN on PATH, the Go toolchain itself comes from the Go module proxy
# (the module golang.org/toolchain, as `go` fetches newer toolchains) into .cache/go.
set -euo pipefail
cd "$(dirname "$0")/.."
K6_VERSION="${K6_VERSION:-v1.4.2}"
GO_MIN="1.24"                       # k6 v1.4.2's go.mod
GO_TOOLCHAIN="${GO_TOOLCHAIN:-go1.24.9}"
BIN="$PWD/.cache/bin/k6"
if [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "k6 ${K6_VERSION}"; then
  echo "$BIN"
  exit 0
fi

# A Go of at least GO_MIN in $GO (scripts/go-toolchain.sh).
source scripts/go-toolchain.sh
echo "building k6 ${K6_VERSION} from go.k6.io/k6 into .cache/bin (once, a few minutes)" >&2
mkdir -p .cache/bin
GOTOOLCHAIN=local GOBIN="$PWD/.cache/bin" GOFLAGS=-mod=mod "$GO" install "go.k6.io/k6@${K6_VERSION}" >&2
echo "$BIN"
