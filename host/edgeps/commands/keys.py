"""`edgeps keys new|derive`: a master key, and per-device keys derived from it.

``edgeps keys new --out master.key`` writes 32 random bytes as hex (mode
0600); ``edgeps keys derive --master master.key --worker w00 --out w00.key``
writes one worker's key, ``--all w00,w01 --out-dir DIR`` one file per worker
(``DIR/<id>.key``). The derivation is documented in `edgeps.security.keys`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from edgeps.security.keys import (
    KeyFileError,
    check_worker_id,
    derive_worker_key,
    load_key_file,
    new_master_key,
    worker_list,
    write_key_file,
)

log = logging.getLogger(__name__)

EXIT_USAGE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    new = sub.add_parser(
        "new", help="make a master key (host only)", description="make a master key"
    )
    new.add_argument("--out", required=True, help="where to write it (mode 0600)")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    derive = sub.add_parser(
        "derive",
        help="derive per-device keys from the master key",
        description="derive per-device keys from the master key",
    )
    derive.add_argument("--master", required=True, help="the master key file")
    one = derive.add_mutually_exclusive_group(required=True)
    one.add_argument("--worker", help="one worker id (with --out)")
    one.add_argument("--all", help="comma-separated worker ids (with --out-dir)")
    derive.add_argument("--out", help="the worker's key file (with --worker)")
    derive.add_argument("--out-dir", help="directory for ID.key files (with --all)")
    derive.add_argument("--force", action="store_true", help="overwrite existing files")


def _new(args: argparse.Namespace) -> int:
    path = write_key_file(args.out, new_master_key(), force=args.force)
    print(f"wrote master key {path} (mode 0600); keep it on the host only")
    return 0


def _derive(args: argparse.Namespace) -> int:
    master = load_key_file(args.master)
    if master.kind == "worker":
        raise KeyFileError(
            f"{args.master} is the worker key of {master.worker_id}, not a master key"
        )
    if args.worker is not None:
        if not args.out or args.out_dir:
            raise ValueError("--worker takes --out FILE (not --out-dir)")
        targets = [(check_worker_id(args.worker), Path(args.out))]
    else:
        if not args.out_dir or args.out:
            raise ValueError("--all takes --out-dir DIR (not --out)")
        ids = worker_list(args.all)
        out_dir = Path(args.out_dir)
        out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        targets = [(wid, out_dir / f"{wid}.key") for wid in ids]
    if not args.force:
        taken = [str(p) for _, p in targets if p.exists()]
        if taken:
            raise FileExistsError(
                f"{', '.join(taken)} exist(s); pass --force to overwrite"
            )
    for wid, path in targets:
        key = derive_worker_key(master.key, wid)
        write_key_file(path, key, worker_id=wid, force=args.force)
        print(f"wrote {wid}'s key {path} (mode 0600)")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return _new(args) if args.keys_action == "new" else _derive(args)
    except (ValueError, OSError) as exc:
        print(f"edgeps keys: {exc}", file=sys.stderr)
        return EXIT_USAGE
