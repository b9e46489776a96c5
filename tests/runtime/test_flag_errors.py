"""A mistake in a flag is said by the subcommand it belongs to, in one wording."""

from __future__ import annotations

import pytest
from edgeps.cli import main

from tests.conftest import free_port


@pytest.mark.parametrize(
    "argv",
    [["serve", "--no-such-flag"], ["worker", "--emulated", "sensors", "--workers", "3"],
     ["bench", "kernels", "--bogus"]],
)  # fmt: skip
def test_an_unknown_flag_prints_the_subcommands_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute
    with pytest.raises(SystemExit) as stop:
        main(argv)
    # Assert
    err = capsys.readouterr().err
    want = " ".join(argv[:2] if argv[0] == "bench" else argv[:1])
    assert stop.value.code == 2
    assert err.startswith(f"usage: edgeps {want} ")
    assert f"edgeps {want}: error: unrecognized arguments: " in err


def test_an_unknown_command_still_gets_the_top_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["servee"])
    assert capsys.readouterr().err.startswith("usage: edgeps [-h]")


LR = "--lr must be a positive number in (0, 1000], got 0.0"
BROKER = ["--broker", f"mqtt://127.0.0.1:{free_port()}", "--job", "j"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["emulate", *BROKER, "--workers", "0"],
         "--workers must be a number of workers in [1, 256], got 0"),
        (["simulate", "--workers", "0"],
         "--workers must be a number of workers in [1, 1000000], got 0"),
        (["demo", "--workers", "0"],
         "--workers must be a number of workers in [1, 64], got 0"),
        (["simulate", "--lr", "0"], LR),
        (["serve", "--lr", "0"], LR),
        (["demo", "--lr", "0"], LR),
        (["emulate", *BROKER, "--batch", "0"],
         "--batch must be a number of rows in [1, 1000000], got 0"),
        (["simulate", "--batch", "0"],
         "--batch must be a number of rows in [1, 1000000], got 0"),
    ],
)  # fmt: skip
def test_the_same_mistake_is_said_the_same_way(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute
    code = main(argv)
    # Assert
    assert code == 2
    assert capsys.readouterr().err.strip().endswith(f"edgeps {argv[0]}: error: {said}")
