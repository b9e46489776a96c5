"""tools/peers' scripts as modules for the tests (they are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO

PEERS = REPO / "tools" / "peers"


def load_peer(name: str, path: str) -> ModuleType:
    """tools/peers/``path`` imported as module ``name`` (kept in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, PEERS / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
