#!/usr/bin/env bash
# Build (once) the Hatchet dashboard of the pinned engine (the React app in the engine's Go module,
# frontend/app) into a cache outside the repo, and print the directory hatchet-lite serves as
# LITE_STATIC_ASSET_DIR. Idempotent: does nothing when the built dashboard is present.
#
#   bash .ci/install_hatchet_dashboard.sh    # build if needed, print .../hatchet/<ENGINE_VERSION>/dashboard
#
# Env: KI_CACHE_DIR (default ~/.cache/ki), GO (default: go on PATH or /usr/local/go/bin/go),
# PYTHON (default python3). Needs Node >= 18 with npm (Debian's nodejs + npm are installed when absent);
# pnpm itself comes from the npm registry at the version the app pins. Why the override and the docs
# generation step: docs/hatchet-engine.md ("Dashboard").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/hatchet-versions.env"
: "${ENGINE_VERSION:?ENGINE_VERSION missing in hatchet-versions.env}"
: "${DASHBOARD_PNPM_VERSION:?DASHBOARD_PNPM_VERSION missing in hatchet-versions.env}"
: "${DASHBOARD_OVERRIDES:?DASHBOARD_OVERRIDES missing in hatchet-versions.env}"

log() { echo "install_hatchet_dashboard: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

module="github.com/hatchet-dev/hatchet"
cache="${KI_CACHE_DIR:-$HOME/.cache/ki}/hatchet/$ENGINE_VERSION"
out="$cache/dashboard"

built() { [[ -f $out/index.html && -f $out/.ki-built ]]; }

# Check, then (under a lock serialising parallel installers that share the cache) check again.
for pass in unlocked locked; do
  built && { echo "$out"; exit 0; }
  [[ $pass == locked ]] && break
  mkdir -p "$cache"
  exec 8>"$cache/.dashboard.lock"
  if command -v flock >/dev/null; then flock 8; fi
done

# Node and npm: Debian's packages when absent (vite 6 needs Node >= 18).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  bash "$here/apt_packages.sh" install_hatchet_dashboard "install Node.js >= 18 with npm" nodejs npm
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
(( node_major >= 18 )) || fail "node $(node --version) is too old; the dashboard's vite build needs Node >= 18"

# The engine's module source: the Go module cache has it after .ci/install_hatchet.sh; `go mod download`
# fetches only that pinned .zip otherwise (verified by the checksum database).
go_bin="${GO:-}"
if [[ -z $go_bin ]]; then
  go_bin="$(command -v go || true)"
  [[ -z $go_bin && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
fi
[[ -n $go_bin && -x $go_bin ]] || fail "no Go toolchain found (needed to fetch the $module@$ENGINE_VERSION source)"
moddir="$(cd / && GOFLAGS=-mod=mod GOTOOLCHAIN=local "$go_bin" mod download -json "$module@$ENGINE_VERSION" \
  | "${PYTHON:-python3}" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')" \
  || fail "go mod download $module@$ENGINE_VERSION"
[[ -f $moddir/frontend/app/package.json ]] || fail "$moddir has no frontend/app/package.json"

start=$(date +%s)
staging="$(mktemp -d "$cache/dashboard.tmp.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
log "building the dashboard of $module@$ENGINE_VERSION (first build: a few minutes, ~1 GB of npm packages)"

# A writable copy of the whole module tree: generate.py reads the SDK examples (sdks/) and writes into
# frontend/app/src/lib/generated/docs (the engine's Taskfile `generate-docs` step; the module zip ships
# without the generated files).
cp -r "$moddir" "$staging/src"
chmod -R u+w "$staging/src"
app="$staging/src/frontend/app"
(cd "$staging/src/frontend/snippets" && "${PYTHON:-python3}" -X utf8 generate.py >"$staging/generate.log" 2>&1) \
  || { tail -n 20 "$staging/generate.log" >&2; fail "frontend/snippets/generate.py"; }
[[ -f $app/src/lib/generated/docs/index.ts || -d $app/src/lib/generated/docs ]] \
  || fail "generate.py did not write frontend/app/src/lib/generated/docs"

# pnpm at the version the app pins (packageManager), from the npm registry, kept in the cache.
tools="$cache/dashboard-tools/pnpm-$DASHBOARD_PNPM_VERSION"
if [[ ! -x $tools/node_modules/.bin/pnpm ]]; then
  npm install --silent --no-save --prefix "$tools" "pnpm@$DASHBOARD_PNPM_VERSION" >&2 \
    || fail "npm install pnpm@$DASHBOARD_PNPM_VERSION"
fi
pnpm="$tools/node_modules/.bin/pnpm"

# Overrides for locked versions the reachable registry does not serve (see hatchet-versions.env).
"${PYTHON:-python3}" - "$app/package.json" "$DASHBOARD_OVERRIDES" <<'EOF'
import json, sys
path, overrides = sys.argv[1], sys.argv[2]
pkg = json.load(open(path))
for item in overrides.split():
    name, version = item.rsplit("@", 1)
    pkg["dependencies"][name] = version
    pkg.setdefault("pnpm", {}).setdefault("overrides", {})[name] = version
json.dump(pkg, open(path, "w"), indent=2)
EOF

# The Sentry build plugin would send telemetry to sentry.io during the build: switched off.
grep -q "sentryVitePlugin({" "$app/vite.config.ts" || fail "vite.config.ts no longer calls sentryVitePlugin({ (re-check the build)"
sed -i 's/sentryVitePlugin({/sentryVitePlugin({ telemetry: false,/' "$app/vite.config.ts"

export CI=1 npm_config_store_dir="$cache/dashboard-tools/pnpm-store"
(
  cd "$app"
  # --no-frozen-lockfile: the lockfile is kept for every other package; only the overridden ones move.
  "$pnpm" install --no-frozen-lockfile --reporter=append-only >"$staging/install.log" 2>&1 \
    || { tail -n 30 "$staging/install.log" >&2; exit 1; }
  # vite alone (the app's `build` script runs `tsc` first: a type check only, minutes on two cores).
  "$pnpm" exec vite build --logLevel warn >"$staging/build.log" 2>&1 \
    || { tail -n 30 "$staging/build.log" >&2; exit 1; }
) || fail "pnpm install / vite build in frontend/app (logs above)"
[[ -f $app/dist/index.html ]] || fail "vite build wrote no dist/index.html"
grep -q '{{ .BasePath }}' "$app/dist/index.html" || fail "dist/index.html lacks the base-path template hatchet-lite renders"

cp "$staging"/*.log "$cache/dashboard-tools/"   # generate.log, install.log, build.log of the last build
rm -rf "$out"
mv "$app/dist" "$out"
find "$out" -name '*.map' -delete
echo "$ENGINE_VERSION built in $(( $(date +%s) - start ))s with node $(node --version), pnpm $DASHBOARD_PNPM_VERSION, overrides: $DASHBOARD_OVERRIDES" >"$out/.ki-built"
log "$(cat "$out/.ki-built")"
echo "$out"
