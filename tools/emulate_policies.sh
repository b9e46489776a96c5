#!/bin/sh
# Sync policies on real MQTT: a thin front of `edgeps bench policies-broker`
# (a private mosquitto, a fresh `edgeps serve` and emulated sensors per
# POLICY); prints time to the target accuracy and updates/s per policy, one
# run each, balancing off, no simulator. For the full slice with medians,
# balancing and the simulator's times, run `edgeps bench policies-broker`.
#   tools/emulate_policies.sh [-s SCENARIO] [-t TARGET] [-m MAX_TIME] [-w WORKERS]
#                             [-a SERVE_ARGS] [-e EMULATE_ARGS] POLICY...
#   e.g. tools/emulate_policies.sh -t 0.93 bsp dsp asp kofn:auto
#        tools/emulate_policies.sh -a --staleness-aware dsp
#        tools/emulate_policies.sh -e "--link-rate 250kbit --link-delay 20ms" dsp
# Defaults: -s stragglers -t 0.93 -m 60 -w 8. It runs the edgeps of this
# checkout's .venv, else the one on PATH (EDGEPS=/path/to/edgeps overrides),
# and exits 1 if any run failed, with the failing command's errors.
set -eu
die() {
    echo "emulate_policies: $*" >&2
    exit 1
}
usage() {
    echo "usage:" >&2
    sed -n '7,8p' "$0" | sed 's/^#//' >&2
    exit 2
}
SCENARIO=stragglers
TARGET=0.93
MAX_TIME=60
WORKERS=8
EXTRA=""
EMULATE_EXTRA=""
while getopts "s:t:m:w:a:e:" opt; do
    case "$opt" in
        s) SCENARIO=$OPTARG ;;
        t) TARGET=$OPTARG ;;
        m) MAX_TIME=$OPTARG ;;
        w) WORKERS=$OPTARG ;;
        a) EXTRA=$OPTARG ;;
        e) EMULATE_EXTRA=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || usage

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${EDGEPS:-}" ]; then
    if [ -x "$ROOT/.venv/bin/edgeps" ]; then
        EDGEPS=$ROOT/.venv/bin/edgeps
    elif command -v edgeps >/dev/null 2>&1; then
        EDGEPS=$(command -v edgeps)
    else
        die "edgeps not found: no $ROOT/.venv/bin/edgeps and none on PATH" \
            "(pip install -e . in a venv, or set EDGEPS=/path/to/edgeps)"
    fi
fi
[ -x "$EDGEPS" ] || die "EDGEPS=$EDGEPS is not an executable file"
PY=$(dirname "$EDGEPS")/python
[ -x "$PY" ] || PY=$(command -v python3) || die "python3 not found"

OUT=$(mktemp)
ERR=$(mktemp)
trap 'rm -f "$OUT" "$ERR"' EXIT
POLICIES=$(printf '%s,' "$@")
if ! "$EDGEPS" bench policies-broker --policies "${POLICIES%,}" \
    --scenarios "$SCENARIO" --workers "$WORKERS" --seeds 1 --balance off --no-sim \
    --target-accuracy "$TARGET" --max-time "$MAX_TIME" --serve-args="$EXTRA" \
    --emulate-args="$EMULATE_EXTRA" --json > "$OUT" 2> "$ERR"; then
    cat "$ERR" >&2
    die "edgeps serve failed: edgeps bench policies-broker refused the run"
fi
"$PY" - "$OUT" <<'PYEOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
failed = False
for r in runs:
    if r["error"]:
        failed = True
        print(f"---- edgeps serve --policy {r['policy']} ----\n{r['stderr_tail']}",
              file=sys.stderr)
        print(f"emulate_policies: edgeps serve failed for policy {r['policy']}: "
              f"{r['error']}", file=sys.stderr)
        continue
    acc = r["final_accuracy"]
    print(f"{r['policy']:8s} accuracy {acc if acc is not None else float('nan'):.3f}  "
          f"elapsed {r['elapsed']:6.2f} s  {r['updates_per_s']:6.1f} updates/s  "
          f"max staleness {r['max_staleness']}  ({r['stop_reason']})")
sys.exit(1 if failed else 0)
PYEOF
