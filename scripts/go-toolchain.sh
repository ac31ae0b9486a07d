# Sourced by the scripts that build a tool from its Go module (install-k6.sh, install-toxiproxy.sh),
# after they cd to the repository: sets GO to a Go of at least $GO_MIN, from PATH, from .cache/go,
# or else $GO_TOOLCHAIN fetched from the Go module proxy into .cache/go.
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
