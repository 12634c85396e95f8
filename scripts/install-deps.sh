#!/usr/bin/env bash
# Installs the Debian packages corral needs to build and test, skipping those already present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  lld                 # links the static corral with its text order (supervisor/CMakeLists.txt)
  libseccomp-dev libcap-dev libboost-dev libyaml-cpp-dev nlohmann-json3-dev
  libsystemd-dev
  # libnftables: the transparent egress path programs each isolated session's namespace with it.
  libnftables-dev
  # systemd-analyze, for the deploy unit's check. Harmless where systemd is not PID 1: Debian's
  # postinst only creates unit symlinks and runs systemctl behind [ -d /run/systemd/system ];
  # becoming init is systemd-sysv's job, not installed here.
  systemd
  # The system bus for .ci/run's systemd scope check (scripts/systemd-scope-check.sh boots this
  # systemd with dbus-daemon inside the pure-v2 VM; nothing starts it on the host).
  dbus
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 procps curl python3
  python3-pytest      # clients/python's suite
  tmux                # corral shell under a real terminal (tests/integration/corral_shell_test.cpp)
  kmod                # loads the loop driver where the pure-v2 VM has it unloaded (io bytes test)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Node.js 20+ and npm for clients/typescript (the machine's Node.js; Debian's nodejs where absent).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "installing: nodejs npm"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
# The TypeScript client's dev dependencies (types and the compiler), from the npm registry, exactly
# as package-lock.json pins them; again only when the lock file changed since the last install.
ts="$(dirname "$0")/../clients/typescript"
if [ ! -e "$ts/node_modules/.package-lock.json" ] || [ "$ts/package-lock.json" -nt "$ts/node_modules/.package-lock.json" ]; then
  (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error)
fi
