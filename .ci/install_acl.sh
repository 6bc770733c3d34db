#!/usr/bin/env bash
# Debian's acl (setfacl/getfacl) for the share-permission tests (tests/integration/test_share_permissions.py):
# they set POSIX ACLs on real files as a firm's IT would. ki itself reads ACLs without it (it parses the
# extended attribute). Idempotent: nothing happens when setfacl exists.
set -euo pipefail
if command -v setfacl >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_acl: no apt-get here; install the acl package (setfacl)" >&2
  exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
echo "installing Debian's acl (apt-get)..." >&2
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq acl >/dev/null
