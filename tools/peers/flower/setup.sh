#!/usr/bin/env bash
# Create Flower's own virtual environment for the side-by-side comparison.
#
# Flower is never a dependency of edgeps: it lives in tools/peers/flower/.venv
# (ignored by git), with a pinned version, and only run_flower.py runs in it.
# Usage: bash tools/peers/flower/setup.sh [PYTHON]
set -euo pipefail

FLWR_VERSION="1.42.0"
NUMPY_SPEC="numpy>=1.26,<3"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${1:-python3}"
venv="$here/.venv"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q "flwr==$FLWR_VERSION" "$NUMPY_SPEC"
"$venv/bin/python" -c 'import flwr, numpy; print("flwr", flwr.__version__, "numpy", numpy.__version__)'
