"""The wheel lists every package of the source tree (a missing one installs broken)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_host_package_is_in_the_wheel() -> None:
    # Prepare
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    host = ROOT / "host"
    found = {
        ".".join(init.parent.relative_to(host).parts)
        for init in host.glob("edgeps/**/__init__.py")
    }

    # Execute
    missing = found - listed

    # Assert
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {missing}"
    assert {"edgeps_worker", "edgeps_firmware"} <= listed
