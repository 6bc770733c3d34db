#!/usr/bin/env bash
# Build (once) the pinned Hatchet engine binaries from the Go module proxy into a cache outside the repo
# and print the path of hatchet-lite on stdout. Idempotent: does nothing when the binaries are present.
#
#   bash .ci/install_hatchet.sh              # build if needed, print the hatchet-lite path
#   bash .ci/install_hatchet.sh --with-sdk   # also: $PYTHON -m pip install hatchet-sdk==$SDK_VERSION
#
# Env: KI_CACHE_DIR (default ~/.cache/ki), PYTHON (default python3), GO (default: go on PATH or
# /usr/local/go/bin/go). Exit 3 when no usable Go toolchain (>= 1.26) is found.
# Versions come from .ci/hatchet-versions.env. Why hatchet-lite and not the hatchet-embedded sidecar,
# and why this engine tag: docs/hatchet-engine.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/hatchet-versions.env"
: "${ENGINE_VERSION:?ENGINE_VERSION missing in hatchet-versions.env}"
: "${SDK_VERSION:?SDK_VERSION missing in hatchet-versions.env}"

with_sdk=0
for arg in "$@"; do
  case "$arg" in
    --with-sdk) with_sdk=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install_hatchet.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

log() { echo "install_hatchet: $*" >&2; }

module="github.com/hatchet-dev/hatchet"
binaries=(hatchet-lite hatchet-admin hatchet-migrate)
cache="${KI_CACHE_DIR:-$HOME/.cache/ki}/hatchet/$ENGINE_VERSION"
bindir="$cache/bin"

have_all() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bindir/$b" ]] || return 1; done
}

if [[ $with_sdk == 1 ]]; then
  "${PYTHON:-python3}" -m pip install --quiet "hatchet-sdk==$SDK_VERSION" >&2
fi

if have_all; then
  echo "$bindir/hatchet-lite"
  exit 0
fi

mkdir -p "$cache"
# Serialise concurrent installers (parallel CI jobs share the cache).
exec 9>"$cache/.install.lock"
command -v flock >/dev/null && flock 9
if have_all; then
  echo "$bindir/hatchet-lite"
  exit 0
fi

go_bin="${GO:-}"
if [[ -z $go_bin ]]; then
  go_bin="$(command -v go || true)"
  [[ -z $go_bin && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
fi
if [[ -z $go_bin || ! -x $go_bin ]]; then
  log "no Go toolchain found${go_bin:+ at $go_bin} (need Go >= 1.26 to build Hatchet $ENGINE_VERSION)"
  exit 3
fi
go_ver="$("$go_bin" env GOVERSION)"            # e.g. go1.26.8
go_minor="$(echo "$go_ver" | sed -E 's/^go1\.([0-9]+).*/\1/')"
if ! [[ $go_minor =~ ^[0-9]+$ ]] || (( go_minor < 26 )); then
  log "$go_bin is $go_ver; Hatchet $ENGINE_VERSION needs Go >= 1.26"
  exit 3
fi

# -X main.Version / cli.Version: without them the binaries report v0.1.0-alpha.0 and the Python
# worker falls back to its legacy (deprecated, randomly failing) registration path.
ldflags="-s -w -X main.Version=$ENGINE_VERSION -X $module/cmd/hatchet-admin/cli.Version=$ENGINE_VERSION"
pkgs=()
for b in "${binaries[@]}"; do pkgs+=("$module/cmd/$b@$ENGINE_VERSION"); done

staging="$(mktemp -d "$cache/bin.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
log "building ${binaries[*]} $ENGINE_VERSION with $go_ver (first build: ~10 min, ~0.5 GB of modules)"
start=$(date +%s)
# Not `go install pkg@version`: that asks the proxy for the module's version list (deprecation check),
# which the registry mirror here refuses (403). Instead a throwaway module (in the cache, not the repo)
# requires the pinned version and `go build`s its commands: only pinned .mod/.zip files are fetched.
# The checksum database here lacks some of Hatchet's own dependencies (e.g. hatchet-dev/pgoutbox), so
# go.sum is seeded from Hatchet's go.sum; the Hatchet module itself is verified against the database.
mkdir -p "$staging/mod"
(
  cd "$staging/mod"
  export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" GOTOOLCHAIN=local GOWORK=off
  "$go_bin" mod init ki-hatchet-build >/dev/null 2>&1
  "$go_bin" get "$module@$ENGINE_VERSION" >&2
  moddir="$("$go_bin" list -m -f '{{.Dir}}' "$module")"
  cat "$moddir/go.sum" >>go.sum
  "$go_bin" build -trimpath -ldflags "$ldflags" -o "$staging/" "${pkgs[@]%@*}" >&2
)
log "built in $(( $(date +%s) - start ))s"

for b in "${binaries[@]}"; do
  v="$("$staging/$b" --version 2>/dev/null | tail -n1 || true)"
  if [[ $v != "$ENGINE_VERSION" ]]; then
    log "$b reports version '$v', expected $ENGINE_VERSION"
    exit 1
  fi
done
mkdir -p "$bindir"
for b in "${binaries[@]}"; do mv -f "$staging/$b" "$bindir/$b"; done
echo "$ENGINE_VERSION" >"$cache/VERSION"
echo "$bindir/hatchet-lite"
