"""A directory a LAN broker's own user can enter, for tests run as root.

Started by root, `serve --lan` has mosquitto drop to its ``mosquitto`` user,
which must reach the job directory; pytest's temporary root is mode 0700.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def lan_home(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` for an ordinary user; as root, a 0711 directory under /tmp."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    here = Path(tempfile.mkdtemp(prefix="edgeps-lan-"))
    here.chmod(0o711)
    try:
        yield here
    finally:
        shutil.rmtree(here, ignore_errors=True)
