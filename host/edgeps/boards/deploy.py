"""`edgeps deploy rpi`: the install steps, env file and systemd unit for a Pi worker.

The output matches tools/rpi/ (install.sh and edgeps-worker.service): the
same venv at /opt/edgeps/venv, the same `edgeps` service user, the same
/etc/edgeps/worker.env keys, so a Pi set up by hand from these steps and one
set up by install.sh run the same service.
"""

from __future__ import annotations

import argparse
import posixpath
import shlex
import sys
from pathlib import Path

from edgeps_worker import wire

PREFIX = "/opt/edgeps"
ENV_FILE = "/etc/edgeps/worker.env"
UNIT_NAME = "edgeps-worker.service"
SERVICE_USER = "edgeps"

UNIT = """\
# edgeps CPython worker as a systemd service (installed by tools/rpi/install.sh).
# Broker, job, worker id and extra flags come from /etc/edgeps/worker.env.
[Unit]
Description=edgeps worker: trains with the parameter server over MQTT
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=edgeps
Group=edgeps
EnvironmentFile=/etc/edgeps/worker.env
ExecStart=/opt/edgeps/venv/bin/edgeps worker --broker ${EDGEPS_BROKER} \
--job ${EDGEPS_JOB} --id ${EDGEPS_ID} $EDGEPS_ARGS
# exit 0: stopped on purpose (with --persist a finished job does not end it);
# crashes restart; a lost broker or host is retried inside the worker
Restart=on-failure
RestartSec=5
# exit 2 is a configuration error (bad flags, bad data file): retrying won't help
RestartPreventExitStatus=2
StateDirectory=edgeps
WorkingDirectory=/var/lib/edgeps
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX

[Install]
WantedBy=multi-user.target
"""


# paths the unit hides from the service: ProtectHome=yes makes these empty and
# unreadable, PrivateTmp=yes gives the service its own /tmp and /var/tmp
HIDDEN_FROM_SERVICE = {
    "/home": "ProtectHome=yes",
    "/root": "ProtectHome=yes",
    "/run/user": "ProtectHome=yes",
    "/tmp": "PrivateTmp=yes",
    "/var/tmp": "PrivateTmp=yes",
}
DATA_DIR = "/var/lib/edgeps"  # the unit's StateDirectory, readable by the service


def check_data(data: str | None) -> None:
    """ValueError for a --data path the sandboxed service could not read."""
    if not data:
        return
    path = posixpath.normpath(posixpath.join(DATA_DIR, data))
    for top, setting in HIDDEN_FROM_SERVICE.items():
        if path == top or path.startswith(top + "/"):
            raise ValueError(
                f"--data {data}: the service runs with {setting}, so it cannot "
                f"read files under {top}; copy the file to {DATA_DIR}/ (e.g. "
                f"{DATA_DIR}/{posixpath.basename(path)}, owned by {SERVICE_USER})"
            )


NO_DATA = (
    "the worker needs data to train on, and without it the service exits at "
    "start: add --data /var/lib/edgeps/FILE.csv (a CSV or NPZ on the Pi) or "
    "--emulated DATASET[:I/N] (a built-in dataset's shard, e.g. sensors:0/4)"
)


def check_args(
    broker: str,
    job: str,
    worker_id: str,
    batch: int,
    data: str | None = None,
    emulated: str | None = None,
) -> None:
    """ValueError for settings the worker would refuse at start-up."""
    if not broker.startswith(("mqtt://", "mqtts://")) or broker[-3:] == "://":
        raise ValueError(f"--broker must look like mqtt://host:1883, got {broker!r}")
    for name, value in (("--job", job), ("--id", worker_id)):
        if not wire.valid_id(value):
            raise ValueError(f"{name} must match [A-Za-z0-9_-]{{1,32}}, got {value!r}")
    if batch < 1:
        raise ValueError("--batch must be positive")
    if not data and not emulated:
        raise ValueError(NO_DATA)
    check_data(data)


def worker_args(
    data: str | None, batch: int, extra: list[str], emulated: str | None = None
) -> str:
    """EDGEPS_ARGS: the flags after broker, job and id, as install.sh writes them."""
    # --persist: a finished job leaves the service waiting for the job's next run
    parts = []
    if data:
        parts += ["--data", data]
    elif emulated:
        parts += ["--emulated", emulated]
    parts += ["--persist", "--batch", str(batch), *extra]
    return shlex.join(parts)


def env_text(broker: str, job: str, worker_id: str, args: str) -> str:
    return (
        f"# {ENV_FILE}: read by {UNIT_NAME}\n"
        f"EDGEPS_BROKER={broker}\nEDGEPS_JOB={job}\nEDGEPS_ID={worker_id}\n"
        f"EDGEPS_ARGS={args}\n"
    )


def install_steps(source: str, env_path: str, unit_path: str) -> list[str]:
    """Root shell lines that set the Pi up, in order (what install.sh runs)."""
    venv = f"{PREFIX}/venv"
    q = shlex.quote
    useradd = shlex.join(
        ["useradd", "--system", "--home-dir", "/var/lib/edgeps", "--shell",
         "/usr/sbin/nologin", SERVICE_USER]
    )  # fmt: skip
    return [
        "apt-get update -q",
        "apt-get install -y --no-install-recommends python3-venv python3-dev gcc",
        f"id {SERVICE_USER} >/dev/null 2>&1 || {useradd}",
        f"install -d -m 0755 {PREFIX}",
        f"python3 -m venv {venv}",
        f"{venv}/bin/pip install --upgrade pip",
        f"{venv}/bin/pip install {q(source)}",
        f"install -d -m 0750 -o root -g {SERVICE_USER} /etc/edgeps",
        f"install -m 0640 -o root -g {SERVICE_USER} {q(env_path)} {ENV_FILE}",
        f"install -m 0644 {q(unit_path)} /etc/systemd/system/{UNIT_NAME}",
        "systemctl daemon-reload",
        f"systemctl enable --now {UNIT_NAME}",
    ]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=["rpi"], help="board family")
    parser.add_argument("--broker", default="mqtt://192.168.1.10:1883")
    parser.add_argument("--job", default="demo")
    parser.add_argument("--id", dest="worker_id", default="pi-1", help="worker id")
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--data", help="data file on the Pi (CSV or NPZ), e.g. /var/lib/edgeps/d.csv"
    )
    src.add_argument(
        "--emulated",
        metavar="DATASET[:I/N]",
        help="train on a built-in dataset's shard instead, e.g. sensors:0/4",
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument(
        "--source", default=".", help="what pip installs: a checkout dir or a wheel"
    )
    parser.add_argument("--out", type=Path, help="write the files here, not stdout")


def run(args: argparse.Namespace) -> int:
    try:
        check_args(
            args.broker, args.job, args.worker_id, args.batch, args.data, args.emulated
        )
    except ValueError as exc:
        print(f"edgeps deploy: {exc}", file=sys.stderr)
        return 2
    flags = worker_args(args.data, args.batch, [], args.emulated)
    env = env_text(args.broker, args.job, args.worker_id, flags)
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            print(f"edgeps deploy: cannot create {args.out}: {exc}", file=sys.stderr)
            return 2
        (args.out / "worker.env").write_text(env)
        (args.out / UNIT_NAME).write_text(UNIT)
        steps = install_steps(args.source, "worker.env", UNIT_NAME)
        script = "#!/bin/sh\n# run as root on the Pi, in this directory\nset -eu\n"
        script += "".join(line + "\n" for line in steps)
        (args.out / "install-steps.sh").write_text(script)
        print(f"wrote worker.env, {UNIT_NAME}, install-steps.sh to {args.out}")
        return 0
    print("# on the Pi, as root, from a checkout of edgeps:")
    print(f"cat > worker.env <<'EOF'\n{env}EOF")
    print(f"cat > {UNIT_NAME} <<'EOF'\n{UNIT}EOF")
    for line in install_steps(args.source, "worker.env", UNIT_NAME):
        print(line)
    print(f"# then: journalctl -u {UNIT_NAME.removesuffix('.service')} -f")
    return 0
