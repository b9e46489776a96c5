"""A test file that cannot score a classifier is refused, naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from edgeps.cli import main


@pytest.mark.parametrize(
    ("rows", "one"), [("1,2,x\n3,4,x\n", "'x'"), ("1,2,3\n3,4,3\n", "'3'")]
)
def test_a_one_class_test_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str, one: str
) -> None:
    # Prepare
    path = tmp_path / "one.csv"
    path.write_text("a,b,label\n" + rows)
    # Execute
    code = main(["serve", "--test-data", str(path), "--max-time", "1"])
    # Assert
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"edgeps serve: error: --test-data {path}: every label is {one}: a "
        "classifier's test file needs rows of 2 or more classes"
    )
