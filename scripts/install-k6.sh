#!/usr/bin/env bash
# Builds k6 from its Go module into .cache/bin once (no prebuilt download needed) and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
K6_VERSION="${K6_VERSION:-v1.4.2}"
BIN="$PWD/.cache/bin/k6"
if [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "k6 ${K6_VERSION}"; then
  echo "$BIN"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "k6 is built from its Go module: install Go first (apt-get install golang-go, or go.dev)" >&2
  exit 1
fi
echo "building k6 ${K6_VERSION} from go.k6.io/k6 into .cache/bin (once, a few minutes)" >&2
mkdir -p .cache/bin
GOBIN="$PWD/.cache/bin" GOFLAGS=-mod=mod go install "go.k6.io/k6@${K6_VERSION}" >&2
echo "$BIN"
