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

go_ok() { # $1: a go binary; true when it is at least GO_MIN
  local v
  v="$("$1" env GOVERSION 2>/dev/null | sed 's/^go//')" || return 1
  [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -1)" = "$GO_MIN" ]
}

GO=""
if command -v go >/dev/null 2>&1 && go_ok go; then
  GO="go"
elif [ -x "$PWD/.cache/go/bin/go" ] && go_ok "$PWD/.cache/go/bin/go"; then
  GO="$PWD/.cache/go/bin/go"
else
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) echo "no Go toolchain for $(uname -m): install Go ${GO_MIN}+ first" >&2; exit 1 ;; esac
  url="${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-${GO_TOOLCHAIN}.linux-${arch}.zip"
  echo "no Go ${GO_MIN}+ on PATH: fetching ${GO_TOOLCHAIN} from the Go module proxy into .cache/go" >&2
  tmp="$(mktemp -d)"
  curl -fsSL "$url" -o "$tmp/go.zip"
  if command -v unzip >/dev/null 2>&1; then unzip -q "$tmp/go.zip" -d "$tmp/x"; else python3 -m zipfile -e "$tmp/go.zip" "$tmp/x"; fi
  rm -rf .cache/go
  mkdir -p .cache
  mv "$tmp/x/golang.org/toolchain@v0.0.1-${GO_TOOLCHAIN}.linux-${arch}" .cache/go
  chmod -R u+x .cache/go/bin .cache/go/pkg/tool
  rm -rf "$tmp"
  GO="$PWD/.cache/go/bin/go"
fi
echo "building toxiproxy ${TOXIPROXY_VERSION} from github.com/Shopify/toxiproxy/v2 into .cache/bin (once)" >&2
mkdir -p .cache/bin
GOTOOLCHAIN=local GOBIN="$PWD/.cache/bin" GOFLAGS=-mod=mod "$GO" install \
  "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}" >&2
mv -f "$PWD/.cache/bin/server" "$BIN"
rm -f "$PWD"/.cache/bin/.toxiproxy-*
touch "$STAMP"
echo "$BIN"
