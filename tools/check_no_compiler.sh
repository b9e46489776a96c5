#!/usr/bin/env bash
# Install edgeps where no C compiler exists and check it runs on numpy.
#
# A fresh venv, a PATH with no gcc or cc and CC=/nonexistent, `pip install .`
# of a clean copy of the checkout (files git knows, no built extension), then
# `edgeps info`: the install must succeed without the C kernels and report
# the numpy backend. CI runs it after the suite (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a clean copy: tracked and new files, not the extension an editable install built
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
        [ -f "$f" ] && cp --parents -- "$f" "$tmp/src/"
    done

python3 -m venv "$tmp/venv"
# the only commands on PATH: the venv's and a shell; no compiler at all
mkdir "$tmp/bin"
for cmd in sh env uname; do
    ln -s "$(command -v "$cmd")" "$tmp/bin/$cmd"
done

PATH="$tmp/venv/bin:$tmp/bin" CC=/nonexistent \
    "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$tmp/src"
info=$(PATH="$tmp/venv/bin:$tmp/bin" "$tmp/venv/bin/edgeps" info --json)
backend=$(printf '%s' "$info" | "$tmp/venv/bin/python" -c \
    'import json, sys; print(json.load(sys.stdin)["kernel_backend"])')
if [ "$backend" != "numpy" ]; then
    echo "check_no_compiler: expected the numpy backend, got $backend" >&2
    exit 1
fi
echo "check_no_compiler: installed without a C compiler; kernels: $backend"
