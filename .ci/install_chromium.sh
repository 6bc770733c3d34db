#!/usr/bin/env bash
# Debian's chromium for the console's browser tests (tests/acceptance/test_console_browser.py): Playwright
# drives it through executable_path, since a Playwright browser download is impossible here. Idempotent:
# nothing happens when /usr/bin/chromium (or $KI_CHROMIUM) exists.
set -euo pipefail
if [ -n "${KI_CHROMIUM:-}" ] && [ -x "$KI_CHROMIUM" ]; then exit 0; fi
if [ -x /usr/bin/chromium ]; then exit 0; fi
bash "$(dirname "$0")/apt_packages.sh" install_chromium "install Chromium and set KI_CHROMIUM to its path" chromium
/usr/bin/chromium --version >&2
