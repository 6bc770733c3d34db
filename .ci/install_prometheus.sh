#!/usr/bin/env bash
# Debian's prometheus package for promtool: tests/integration/test_metrics_alerts.py checks
# docs/prometheus-alerts.yaml with `promtool check rules` and `promtool test rules`. Idempotent: nothing
# happens when promtool is on PATH (or $KI_PROMTOOL exists). The package's server is not started here.
set -euo pipefail
if [ -n "${KI_PROMTOOL:-}" ] && [ -x "$KI_PROMTOOL" ]; then exit 0; fi
if command -v promtool >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_prometheus: no apt-get here; install promtool and set KI_PROMTOOL to its path" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "installing Debian's prometheus (for promtool; apt-get)..." >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
promtool --version >&2
