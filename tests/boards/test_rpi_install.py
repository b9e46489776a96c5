"""Raspberry Pi install files: the unit, the env example and install.sh agree."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

RPI = Path(__file__).resolve().parents[2] / "tools" / "rpi"


BOTH_SOURCES = ("--broker", "mqtt://h", "--job", "lab", "--data",
                "/var/lib/edgeps/d.csv", "--emulated", "sensors:0/4")  # fmt: skip


def _dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(RPI / "install.sh"), "--dry-run", *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_unit_runs_the_installed_worker_from_the_env_file() -> None:
    # Prepare
    unit = (RPI / "edgeps-worker.service").read_text()
    env = (RPI / "worker.env.example").read_text()
    # Execute
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M)
    used = set(re.findall(r"\$\{?(EDGEPS_[A-Z]+)\}?", unit))
    defined = set(re.findall(r"^(EDGEPS_[A-Z]+)=", env, re.M))
    # Assert
    assert exec_start is not None
    assert exec_start.group(1).startswith("/opt/edgeps/venv/bin/edgeps worker ")
    assert (
        used == defined == {"EDGEPS_BROKER", "EDGEPS_JOB", "EDGEPS_ID", "EDGEPS_ARGS"}
    )
    assert "User=edgeps" in unit and "Restart=on-failure" in unit
    assert "EnvironmentFile=/etc/edgeps/worker.env" in unit
    assert "RestartPreventExitStatus=2" in unit  # edgeps worker: 2 = bad config


def test_install_dry_run_lists_every_step_without_doing_them() -> None:
    # Execute
    proc = _dry_run("--broker", "mqtt://10.0.0.2:1883", "--job", "lab", "--id", "pi-7",
                    "--emulated", "sensors:0/4")  # fmt: skip
    # Assert
    assert proc.returncode == 0, proc.stderr
    steps = [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert any(s.startswith("python3 -m venv /opt/edgeps/venv") for s in steps)
    assert any("/opt/edgeps/venv/bin/pip install" in s for s in steps)
    assert any(s.endswith("/etc/systemd/system/edgeps-worker.service") for s in steps)
    assert steps[-1] == "systemctl enable --now edgeps-worker.service"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job", "lab"], "--broker is required"),
        (["--broker", "mqtt://h"], "--job is required"),
        (["--broker", "http://h", "--job", "lab"], "mqtt://"),
        (["--broker", "mqtt://h", "--job", "a b"], "may only use"),
        (["--broker", "mqtt://h", "--job", "lab", "--bogus"], "unknown option"),
        (["--broker", "mqtt://h", "--job", "lab"], "the worker needs data: add --data"),
        ([*BOTH_SOURCES], "not both"),
    ],
)
def test_install_refuses_bad_arguments(args: list[str], message: str) -> None:
    proc = _dry_run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr


@pytest.mark.parametrize(
    "data", ["/home/pi/data.csv", "/root/d.csv", "/tmp/d.csv", "../../../home/pi/d.csv"]
)
def test_deploy_refuses_data_the_sandboxed_service_cannot_read(data, capsys) -> None:
    # Prepare: the unit hides these paths from the service
    from edgeps.boards import deploy
    from edgeps.cli import main

    unit = deploy.UNIT
    assert "ProtectHome=yes" in unit and "PrivateTmp=yes" in unit
    # Execute
    code = main(["deploy", "rpi", "--broker", "mqtt://h:1883", "--data", data])
    # Assert
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot read files under" in err and "/var/lib/edgeps/" in err


def test_deploy_without_data_refuses_to_write_a_service_that_cannot_start(
    tmp_path, capsys
) -> None:
    from edgeps.cli import main

    # Execute: as a README once showed it, with no --data
    code = main(["deploy", "rpi", "--broker", "mqtt://h:1883", "--out", str(tmp_path)])
    # Assert: one line that says what to add, and no files
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "add --data" in err[0] and "--emulated" in err[0]
    assert not list(tmp_path.iterdir())


def test_deploy_with_emulated_data_writes_a_service_that_can_start(tmp_path) -> None:
    from edgeps.cli import build_parser, main

    # Execute
    code = main(["deploy", "rpi", "--emulated", "sensors:0/4", "--out", str(tmp_path)])
    # Assert: the env file's flags parse with the real worker's
    assert code == 0
    env = (tmp_path / "worker.env").read_text()
    (args_line,) = [x for x in env.splitlines() if x.startswith("EDGEPS_ARGS=")]
    argv = ["worker", "--broker", "mqtt://h", "--job", "j", "--id", "pi-1",
            *args_line.split("=", 1)[1].split()]  # fmt: skip
    args = build_parser("worker", argv).parse_args(argv)
    assert args.emulated == "sensors:0/4" and args.data is None and args.persist


def test_install_with_emulated_data_writes_it_to_the_env_file() -> None:
    proc = _dry_run("--broker", "mqtt://h:1883", "--job", "j", "--emulated",
                    "sensors:0/4")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "+ systemctl enable --now edgeps-worker.service" in proc.stdout


def test_deploy_accepts_data_in_the_service_state_dir(tmp_path) -> None:
    from edgeps.cli import main

    for data in ("/var/lib/edgeps/d.csv", "d.csv", "/srv/edgeps/d.csv"):
        assert main(["deploy", "rpi", "--data", data, "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize("data", ["/home/pi/data.csv", "/var/tmp/d.csv"])
def test_install_refuses_data_the_service_cannot_read(data) -> None:
    # Execute
    proc = _dry_run("--broker", "mqtt://h:1883", "--job", "j", "--data", data)
    # Assert
    assert proc.returncode == 2
    assert "cannot read it" in proc.stderr and "/var/lib/edgeps/" in proc.stderr
    assert "+ apt-get" not in proc.stdout
