#!/bin/sh
# Install the edgeps CPython worker as a systemd service on a Raspberry Pi
# (Raspberry Pi OS / Debian). Run as root from a checkout of the repository:
#   sudo tools/rpi/install.sh --broker mqtt://HOST:1883 --job JOB --id pi-1 \
#        (--data /var/lib/edgeps/data.csv | --emulated DATASET[:I/N])
#        [--source DIR_OR_WHEEL] [--dry-run]
set -eu

PREFIX=/opt/edgeps
ETC=/etc/edgeps
UNIT_DIR=/etc/systemd/system
SVC_USER=edgeps
HERE=$(cd "$(dirname "$0")" && pwd)
SOURCE=$(cd "$HERE/../.." && pwd)
BROKER=""
JOB=""
WID=$(hostname -s 2>/dev/null | tr -c 'A-Za-z0-9_\n-' '-' | cut -c1-32)
DATA=""
EMULATED=""
DRY_RUN=0

usage() {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --broker) BROKER=${2:?--broker needs a URL}; shift 2 ;;
        --job) JOB=${2:?--job needs a name}; shift 2 ;;
        --id) WID=${2:?--id needs a worker id}; shift 2 ;;
        --data) DATA=${2:?--data needs a path}; shift 2 ;;
        --emulated) EMULATED=${2:?--emulated needs DATASET[:I/N]}; shift 2 ;;
        --source) SOURCE=${2:?--source needs a path}; shift 2 ;;
        --dry-run) DRY_RUN=1; shift ;;
        -h|--help) usage ;;
        *) echo "install.sh: unknown option $1" >&2; usage ;;
    esac
done

[ -n "$BROKER" ] || { echo "install.sh: --broker is required" >&2; exit 2; }
[ -n "$JOB" ] || { echo "install.sh: --job is required" >&2; exit 2; }
case "$BROKER" in
    mqtt://*|mqtts://*) ;;
    *) echo "install.sh: --broker must start with mqtt:// or mqtts://" >&2; exit 2 ;;
esac
if ! printf '%s' "$JOB$WID" | grep -Eq '^[A-Za-z0-9_-]+$'; then
    echo "install.sh: job and worker id may only use A-Z a-z 0-9 _ -" >&2
    exit 2
fi
# without data the worker exits 2 at start and the unit does not restart it
if [ -z "$DATA" ] && [ -z "$EMULATED" ]; then
    echo "install.sh: the worker needs data: add --data /var/lib/edgeps/FILE.csv" \
         "(a CSV or NPZ on the Pi) or --emulated DATASET[:I/N] (e.g. sensors:0/4)" >&2
    exit 2
fi
if [ -n "$DATA" ] && [ -n "$EMULATED" ]; then
    echo "install.sh: give --data or --emulated, not both" >&2
    exit 2
fi
case "$EMULATED" in
    *[!A-Za-z0-9_:/.-]*)
        echo "install.sh: --emulated looks like sensors:0/4, got $EMULATED" >&2
        exit 2 ;;
esac
[ -e "$SOURCE" ] || { echo "install.sh: no source at $SOURCE" >&2; exit 2; }
# the unit runs with ProtectHome=yes and PrivateTmp=yes: the service cannot
# read data under /home, /root, /run/user, /tmp or /var/tmp
case "$DATA" in
    /home|/home/*|/root|/root/*|/run/user|/run/user/*|/tmp|/tmp/*|/var/tmp|/var/tmp/*)
        echo "install.sh: --data $DATA: the service cannot read it (ProtectHome=yes," \
             "PrivateTmp=yes); copy it to /var/lib/edgeps/ first" >&2
        exit 2 ;;
esac

run() {
    echo "+ $*"
    if [ "$DRY_RUN" -eq 0 ]; then
        "$@"
    fi
}

if [ "$DRY_RUN" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: run as root (sudo), or pass --dry-run to see the steps" >&2
    exit 1
fi

# a compiler and headers build the C kernels; without them numpy is used
run apt-get update -q
run apt-get install -y --no-install-recommends python3-venv python3-dev gcc
if ! id "$SVC_USER" >/dev/null 2>&1; then
    run useradd --system --home-dir /var/lib/edgeps --shell /usr/sbin/nologin "$SVC_USER"
fi
run install -d -m 0755 "$PREFIX"
run python3 -m venv "$PREFIX/venv"
run "$PREFIX/venv/bin/pip" install --upgrade pip
run "$PREFIX/venv/bin/pip" install "$SOURCE"
run install -d -m 0750 -o root -g "$SVC_USER" "$ETC"

ARGS="--persist --batch 32"
if [ -n "$DATA" ]; then
    ARGS="--data $DATA $ARGS"
else
    ARGS="--emulated $EMULATED $ARGS"
fi
ENV_FILE="$ETC/worker.env"
if [ -e "$ENV_FILE" ]; then
    echo "keeping the existing $ENV_FILE"
else
    echo "+ write $ENV_FILE"
    if [ "$DRY_RUN" -eq 0 ]; then
        umask 027
        cat > "$ENV_FILE" <<ENV
EDGEPS_BROKER=$BROKER
EDGEPS_JOB=$JOB
EDGEPS_ID=$WID
EDGEPS_ARGS=$ARGS
ENV
        chgrp "$SVC_USER" "$ENV_FILE"
    fi
fi
run install -m 0644 "$HERE/edgeps-worker.service" "$UNIT_DIR/edgeps-worker.service"
run systemctl daemon-reload
run systemctl enable --now edgeps-worker.service
echo "installed: follow the worker with 'journalctl -u edgeps-worker -f'"
