#!/usr/bin/env bash
# Install Debian packages for a .ci/install_*.sh script: apt_packages.sh NAME HINT PACKAGE...
# NAME names the caller in messages; HINT says what to do where there is no apt-get. Waits up to 10 minutes
# for another apt/dpkg run to release its lock. Not an installer itself (scripts/test.sh runs install_*.sh).
set -euo pipefail
name=$1 hint=$2
shift 2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$name: no apt-get here; $hint" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "$name: installing $* (apt-get)..." >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
