#!/usr/bin/env bash
# Set up this checkout on a Debian/Ubuntu machine and run the test suite.
#
# Installs what the tests need and is missing (apt, as root or through sudo;
# waits while another process holds apt's lock), aedes for the broker-cluster
# tests (npm), the venv with the dev extra, then runs pytest. Extra arguments
# go to pytest: `bash tools/test.sh -m "not slow"`, `bash tools/test.sh
# tests/wire`. tests/README.md lists what each marker needs and which tests
# skip when a tool is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# how long apt waits for a lock another process holds (unattended-upgrades on
# a fresh machine, another install) before giving up
APT_LOCK_WAIT=600

say() { echo "tools/test.sh: $*" >&2; }

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# Debian package names of what is missing, one a line
missing_packages() {
    have mosquitto || echo mosquitto
    have openssl || echo openssl
    # the C compilers: native/ headers, portable builds, the cffi extension
    have gcc || echo gcc
    have g++ || echo g++
    python3 -c 'import ensurepip, venv' 2>/dev/null || echo python3-venv
    python3 -c 'import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
        echo python3-dev
    # the dashboard test renders the page in a real headless browser
    have chromium || echo chromium
    # native/ cross-compiled for the Raspberry Pi's ISAs, run under qemu-user
    have aarch64-linux-gnu-gcc || echo gcc-aarch64-linux-gnu
    have arm-linux-gnueabihf-gcc || echo gcc-arm-linux-gnueabihf
    { have qemu-aarch64 && have qemu-arm; } || echo qemu-user
    installed libc6-dev-arm64-cross || echo libc6-dev-arm64-cross
    installed libc6-dev-armhf-cross || echo libc6-dev-armhf-cross
    # `--dataset fashion-mnist` reads the images Debian ships
    installed dataset-fashion-mnist || echo dataset-fashion-mnist
    # the two-node aedes cluster shares its state through redis
    have redis-server || echo redis-server
    if ! have node; then
        echo nodejs
        echo npm
    elif ! have npm; then
        echo npm
    fi
}

# apt-get as root, or through sudo
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        env DEBIAN_FRONTEND=noninteractive "$@"
    elif have sudo; then
        sudo env DEBIAN_FRONTEND=noninteractive "$@"
    else
        say "needs root or sudo to install: $*"
        exit 1
    fi
}

apt_get() { as_root apt-get -q -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" "$@"; }

# `apt-get update` takes the package lists' lock, which older apt does not wait
# for: retry while that lock is held, up to APT_LOCK_WAIT seconds
apt_update() {
    local deadline=$((SECONDS + APT_LOCK_WAIT)) out
    while :; do
        if out=$(apt_get update 2>&1); then
            return 0
        fi
        if ! grep -q "Could not get lock" <<<"$out" || [ "$SECONDS" -ge "$deadline" ]; then
            echo "$out" >&2
            return 1
        fi
        say "apt's package lists are locked by another process; waiting"
        sleep 5
    done
}

mapfile -t packages < <(missing_packages)
if [ "${#packages[@]}" -gt 0 ]; then
    if ! have apt-get; then
        say "missing ${packages[*]}, and no apt-get to install them"
        exit 1
    fi
    say "installing ${packages[*]}"
    apt_update
    apt_get install -y "${packages[@]}"
fi

# aedes (tools/aedes) for the broker-cluster tests; its package asks Node >= 20
if [ "$(node_major)" -ge 20 ]; then
    lock=tools/aedes/package-lock.json
    if [ ! -d tools/aedes/node_modules/aedes ] ||
        [ "$lock" -nt tools/aedes/node_modules/.package-lock.json ]; then
        npm ci --prefix tools/aedes --no-audit --no-fund
    fi
else
    say "node $(node --version 2>/dev/null || echo missing) is older than 20:" \
        "the aedes cluster tests will skip"
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/python -m pytest "$@"
