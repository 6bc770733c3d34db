#!/usr/bin/env bash
# Debian's chromium for the console's browser tests (tests/acceptance/test_console_browser.py): Playwright
# drives it through executable_path, since a Playwright browser download is impossible here. Idempotent:
# nothing happens when /usr/bin/chromium (or $KI_CHROMIUM) exists.
set -euo pipefail
if [ -n "${KI_CHROMIUM:-}" ] && [ -x "$KI_CHROMIUM" ]; then exit 0; fi
if [ -x /usr/bin/chromium ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium: no apt-get here; install Chromium and set KI_CHROMIUM to its path" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "installing Debian's chromium (apt-get)..." >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
/usr/bin/chromium --version >&2
