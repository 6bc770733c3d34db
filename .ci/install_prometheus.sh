#!/usr/bin/env bash
# Debian's prometheus package for promtool: tests/integration/test_metrics_alerts.py checks
# docs/prometheus-alerts.yaml with `promtool check rules` and `promtool test rules`. Idempotent: nothing
# happens when promtool is on PATH (or $KI_PROMTOOL exists). The package's server is not started here.
set -euo pipefail
if [ -n "${KI_PROMTOOL:-}" ] && [ -x "$KI_PROMTOOL" ]; then exit 0; fi
if command -v promtool >/dev/null 2>&1; then exit 0; fi
bash "$(dirname "$0")/apt_packages.sh" install_prometheus "install promtool and set KI_PROMTOOL to its path" \
  --no-install-recommends prometheus
promtool --version >&2
