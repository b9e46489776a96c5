"""The edgeps worker: runs unchanged on MicroPython (ESP32) and CPython."""

import sys

VERSION = "0.1.0"


def unload(name):
    """On MicroPython, drop submodule ``name`` until its next import: a loaded
    module's code takes heap (its names stay interned)."""
    if sys.implementation.name == "micropython":
        globals().pop(name, None)
        sys.modules.pop("edgeps_worker." + name, None)
