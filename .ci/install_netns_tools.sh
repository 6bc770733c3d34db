#!/usr/bin/env bash
# Debian's iproute2 (`ip netns`, veth pairs, a bridge) and util-linux (`unshare`) for the two-host Hatchet test
# (tests/integration/orchestrator/test_hatchet_two_hosts.py, tests/helpers/netns.py): each worker runs in a
# network namespace of its own, as another host. The test needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); ki itself
# needs neither tool. Idempotent: nothing happens when both exist.
set -euo pipefail
if command -v ip >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1; then exit 0; fi
bash "$(dirname "$0")/apt_packages.sh" install_netns_tools "install iproute2 and util-linux (ip, unshare)" \
  iproute2 util-linux
