#!/usr/bin/env bash
# Debian's LibreOffice without its GUI, for the legacy Office converter (ki.convert.legacy: .doc, .dot,
# .ppt, .wpd, .wps, .pages through `soffice --headless`). ki runs without it (legacy files are quarantined
# `needs_converter`); the tests of the converter need it. Idempotent: nothing happens when soffice is
# already on PATH (or $KI_SOFFICE names an executable).
set -euo pipefail
if [ -n "${KI_SOFFICE:-}" ] && [ -x "$KI_SOFFICE" ]; then exit 0; fi
if command -v soffice >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_libreoffice: no apt-get here; install LibreOffice and set components.libreoffice to its soffice" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "installing Debian's LibreOffice (writer, calc, impress; no GUI) with apt-get..." >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
  --no-install-recommends libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui >/dev/null
soffice --version >&2
