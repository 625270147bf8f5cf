#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root):
# Debian packages, OVS started, .venv from Debian's python3 (sees mininet), project installed.
# Usage: scripts/bootstrap.sh [--with-web]   (--with-web adds PostgreSQL + Chromium for web tests)
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_WEB=0
for a in "$@"; do [ "$a" = "--with-web" ] && WITH_WEB=1; done

log() { printf '[bootstrap] %s\n' "$*"; }

PKGS=(openvswitch-switch mininet iputils-ping ethtool iperf3 python3-venv python3-dev iproute2 procps curl gcc libc6-dev)
# etcd for the leader election of several controllers (app/ha): the labs and tests start their own
# private etcd as a plain process (app/ha/etcd_server.py); apt's service is not used
PKGS+=(etcd-server)
[ "$WITH_WEB" = 1 ] && PKGS+=(postgresql chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# OVS is not started by apt in containers.
if ! ovs-vsctl --timeout=2 show >/dev/null 2>&1; then
  log "starting Open vSwitch"
  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv from /usr/bin/python3 (--system-site-packages, so mininet imports)"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.installed-$(cat setup.py | md5sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  log "installing the project into .venv"
  .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# The delay element and its probe (C; the kernel has no netem): built once per source version,
# into mininet_labs/delay/_build/ (not committed).
.venv/bin/python -m mininet_labs.delay build >/dev/null
log "ready"
