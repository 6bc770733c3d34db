#!/usr/bin/env bash
# Debian's acl (setfacl/getfacl) for the share-permission tests (tests/integration/test_share_permissions.py):
# they set POSIX ACLs on real files as a firm's IT would. ki itself reads ACLs without it (it parses the
# extended attribute). Idempotent: nothing happens when setfacl exists.
set -euo pipefail
if command -v setfacl >/dev/null 2>&1; then exit 0; fi
bash "$(dirname "$0")/apt_packages.sh" install_acl "install the acl package (setfacl)" acl
