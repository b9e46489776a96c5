"""`edgeps relay`: serve one site's boards and be one worker of the central job.

The central connection takes the shared flags (``--broker``, ``--username``,
``--password-file``, ``--tls-*``, ``--keepalive``, ``--hmac-key-file``: the
relay's own key in the central job, or the central master to derive it);
the site's connection the same names with ``--site-`` in front, and
``--site-hmac-key-file`` is the site's master key. See `edgeps.relay`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import asdict
from types import FrameType, SimpleNamespace
from typing import Any

EXAMPLES = """examples:
  edgeps relay --broker mqtt://central:1883 --job lab --id site-a \\
      --site-broker auto --site-job lab-a --policy bsp
  edgeps relay --broker mqtts://central:8883 --tls-ca ca.pem --username site-a \\
      --password-file site-a.pass --hmac-key-file site-a.key --job lab --id site-a \\
      --site-broker mqtt://127.0.0.1:1883 --site-hmac-key-file site-a-master.key

Boards join the site job on the site broker as they would join serve:
  edgeps emulate --broker mqtt://SITE:PORT --job lab-a --workers 8"""

# site connection flags: name -> (metavar, help), as the central ones
_SITE_FLAGS = {
    "username": ("NAME", "the site broker's MQTT user name"),
    "password_file": ("FILE", "file holding the site broker's MQTT password"),
    "tls_ca": ("FILE", "CA bundle (PEM) for the site broker's certificate"),
    "tls_cert": ("FILE", "client certificate (PEM) for the site broker"),
    "tls_key": ("FILE", "client private key (PEM) for the site broker"),
}


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.runtime.connection_flags import add_connection_flags

    p = parser
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EXAMPLES
    add_connection_flags(
        p,
        broker_help="the central broker, mqtt://HOST[:PORT] or mqtts://HOST[:PORT]",
    )
    s = p.add_argument_group("site")
    s.add_argument(
        "--site-broker",
        default="auto",
        metavar="URL",
        help="the site's broker: a URL, or auto/mosquitto/amqtt to start one here "
        "(default: auto)",
    )
    for name, (metavar, help_text) in _SITE_FLAGS.items():
        s.add_argument(
            "--site-" + name.replace("_", "-"), metavar=metavar, help=help_text
        )
    s.add_argument(
        "--site-tls-insecure", action="store_true", help="skip the site cert checks"
    )
    s.add_argument(
        "--site-hmac-key-file",
        metavar="FILE",
        help="the site's master key: each board's key is derived from it",
    )
    p.add_argument("--job", required=True, help="the central job id")
    p.add_argument("--id", dest="relay_id", required=True, help="this relay's id")
    p.add_argument("--site-job", help="the site's job id (default: --job)")
    p.add_argument(
        "--policy", default="bsp", help="the site's sync policy (default: bsp)"
    )
    p.add_argument(
        "--balance",
        action="store_true",
        help="assign each site board its batch from its measured speed, as serve "
        "--balance does for its workers (default: off)",
    )
    p.add_argument(
        "--min-fold",
        type=int,
        default=0,
        metavar="K",
        help="a round goes upstream only with K gradients in it, or one from every "
        "live board if fewer (default 0: when the site policy releases a board)",
    )
    p.add_argument(
        "--liveness-timeout",
        type=float,
        default=10.0,
        help="seconds of silence before a board is dead (default: 10)",
    )
    p.add_argument(
        "--norm-guard",
        type=float,
        default=10.0,
        metavar="K",
        help="drop board updates above K x the median norm; 0: off (default: 10)",
    )
    p.add_argument("--max-update-norm", type=float, help="drop larger board updates")
    p.add_argument(
        "--max-chunk",
        type=int,
        default=1 << 16,
        help="largest upstream message (default: 65536 B)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _site_options(args: argparse.Namespace) -> Any:
    from edgeps.runtime.connection_flags import connection_options

    ns = SimpleNamespace(
        broker=args.site_broker,
        tls_insecure=args.site_tls_insecure,
        keepalive=args.keepalive,
        **{name: getattr(args, "site_" + name) for name in _SITE_FLAGS},
    )
    return connection_options(ns)


def build_config(args: argparse.Namespace) -> Any:
    """A checked `RelayConfig` from the parsed flags; ValueError if unusable."""
    from edgeps.relay import RelayConfig
    from edgeps.runtime.connection_flags import (
        connection_options,
        read_key,
        read_worker_key,
    )

    return RelayConfig(
        central=connection_options(args),
        site=_site_options(args),
        job=args.job,
        relay_id=args.relay_id,
        site_job=args.site_job,
        policy=args.policy,
        balance=args.balance,
        min_fold=args.min_fold,
        liveness_timeout=args.liveness_timeout,
        max_update_norm=args.max_update_norm,
        norm_guard=args.norm_guard,
        central_key=read_worker_key(args.hmac_key_file, args.relay_id),
        site_key=read_key(args.site_hmac_key_file),
        max_chunk=args.max_chunk,
    )


def summary_text(summary: Any) -> str:
    """The upstream line, then the site's table as serve prints it."""
    from edgeps.runtime.summary import summary_table

    up = summary.upstream
    lines = [
        f"relay {summary.relay_id}: stop {summary.stop_reason}; upstream pushes "
        f"{up.get('rounds', 0)} rounds, fan-in {up.get('fan_in', 0.0):.2f} boards "
        f"per round (largest {up.get('largest_round', 0)}), late "
        f"{up.get('late', 0)}, median round {_secs(up.get('round_s_median'))}"
    ]
    if summary.site is not None:
        lines.append(summary_table(summary.site))
    return "\n".join(lines)


def _announce(text: str) -> None:
    print(f"edgeps {text}", file=sys.stderr, flush=True)


def _secs(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}s"


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.metrics import dumps
    from edgeps.relay import Relay
    from edgeps.runtime.connection_flags import setup_logging

    setup_logging(args.log_level)
    try:
        relay = Relay(build_config(args), announce=_announce)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"edgeps relay: error: {exc}", file=sys.stderr)
        return 2

    def on_signal(signum: int, frame: FrameType | None) -> None:
        relay.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        summary = relay.run()
    except (ConnectionError, RuntimeError, ValueError) as exc:
        print(f"edgeps relay: error: {exc}", file=sys.stderr)
        return 2
    print(dumps(asdict(summary)) if args.json else summary_text(summary))
    if summary.stop_reason in ("model_mismatch", "duplicate_id", "error"):
        print(f"edgeps relay: stopped: {summary.stop_reason}", file=sys.stderr)
        return 2  # retrying the same flags will not help
    return 0
