#!/usr/bin/env bash
# Debian's LibreOffice without its GUI, for the legacy Office converter (ki.adapters.convert.legacy: .doc, .dot,
# .ppt, .wpd, .wps, .pages through `soffice --headless`). ki runs without it (legacy files are quarantined
# `needs_converter`); the tests of the converter need it. Idempotent: nothing happens when soffice is
# already on PATH.
set -euo pipefail
if command -v soffice >/dev/null 2>&1; then exit 0; fi
bash "$(dirname "$0")/apt_packages.sh" install_libreoffice \
  "install LibreOffice and set components.libreoffice to its soffice" \
  --no-install-recommends libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui
soffice --version >&2
