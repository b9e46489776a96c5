"""`edgeps broker-config`: a mosquitto setup that confines each worker to its topics.

Writes ``DIR/mosquitto.conf``, ``DIR/passwd`` (mosquitto's password file),
``DIR/acl`` (its ``acl_file``) and ``DIR/credentials/<user>.password`` (mode
0600, one random password per worker and one for the host). A worker's MQTT
user name is its worker id. See `edgeps.security.mosquitto` for the rules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgeps.security.broker_files import DEFAULT_HOST_USER, write_broker_config
from edgeps.security.keys import worker_list
from edgeps.security.mosquitto import parse_listen
from edgeps.transport.broker_tuning import SPARE_FDS

EXIT_USAGE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job", required=True, help="the job id")
    parser.add_argument(
        "--workers", required=True, help="comma-separated worker ids (= user names)"
    )
    parser.add_argument("--out", required=True, help="directory to write into")
    parser.add_argument(
        "--listen", default="127.0.0.1:1883", help="HOST:PORT (default %(default)s)"
    )
    parser.add_argument(
        "--host-user",
        default=DEFAULT_HOST_USER,
        help="the host's MQTT user (default %(default)s)",
    )
    parser.add_argument(
        "--run-as",
        help="system user a root-started mosquitto drops to "
        "(default: mosquitto when run as root, else you)",
    )
    parser.add_argument(
        "--hasher",
        choices=("auto", "tool", "builtin"),
        default="auto",
        help="hash passwords with mosquitto_passwd (tool), in Python (builtin) "
        "or the tool when installed (auto)",
    )
    parser.add_argument(
        "--sensors",
        type=int,
        help="size the host's queue limits for this many sensors "
        "(default: mosquitto's small limits)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an old setup")


def run(args: argparse.Namespace) -> int:
    try:
        files = write_broker_config(
            Path(args.out),
            job=args.job,
            workers=worker_list(args.workers),
            listen=parse_listen(args.listen),
            host_user=args.host_user,
            run_as=args.run_as,
            hasher=args.hasher,
            force=args.force,
            sensors=args.sensors,
        )
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps broker-config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {files.conf} (start it: mosquitto -c {files.conf})")
    print(f"wrote {files.passwd} (hashed by {files.hashed_by}) and {files.acl}")
    for user, path in files.credentials.items():
        print(f"  MQTT user {user}: password in {path}")
    if args.sensors is not None:
        print(
            f"sized for {args.sensors} sensors: give mosquitto at least "
            f"{args.sensors + SPARE_FDS} open files (ulimit -n, or LimitNOFILE= "
            "in its systemd unit)"
        )
    return 0
