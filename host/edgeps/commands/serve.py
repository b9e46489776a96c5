"""`edgeps serve`: run the host coordinator (parameter server) for one job over MQTT.

Every flag defaults to "not given", so the merge order is plain: built-in
defaults, then ``--config FILE.toml``, then the flags on the command line.
"""

from __future__ import annotations

import argparse
import logging
import sys

from edgeps.observe import dashboard

SUPPRESS = argparse.SUPPRESS


def _flag(
    p: argparse.ArgumentParser,
    name: str,
    help_text: str,
    defaults: dict[str, object] | None = None,
    **kw: object,
) -> None:
    from edgeps.commands.serve_config import ServeConfig

    dest = str(kw.get("dest") or name.lstrip("-").replace("-", "_"))
    default = (defaults or {}).get(dest, getattr(ServeConfig, dest, None))
    if default is not None and not isinstance(default, bool):
        help_text = f"{help_text} (default {default})"
    p.add_argument(name, default=SUPPRESS, help=help_text, **kw)  # type: ignore[arg-type]


def add_job_flags(
    p: argparse.ArgumentParser, defaults: dict[str, object] | None = None
) -> None:
    """Flags shared by `serve` and `demo`: what to train and how to synchronize."""
    d = defaults
    _flag(p, "--job", "job id: 1-32 of [A-Za-z0-9_-]", d)
    _flag(p, "--policy", "sync policy: bsp, asp, ssp:3, dsp, dsp:w=8, kofn:k=6, ...", d)
    _flag(p, "--model", "model spec, e.g. mlp:30-32-6 (default: the dataset's)", d)
    _flag(p, "--dataset", "sensors (built in), digits, breast_cancer (scikit-learn)", d)
    _flag(p, "--seed", "seed for data split and initial parameters", d, type=int)
    _flag(p, "--lr", "learning rate", d, type=float)
    _flag(p, "--optimizer", "sgd, momentum or adam", d)
    _flag(p, "--target-accuracy", "stop at this test accuracy (0..1]", d, type=float)
    _flag(p, "--max-time", "stop after this many seconds", d, type=float)
    _flag(p, "--metrics-out", "append JSON-lines metrics snapshots to this file", d)
    _flag(p, "--json", "print the final summary as JSON", d, action="store_true")
    _flag(p, "--quiet", "no live progress display", d, action="store_true")


def configure(parser: argparse.ArgumentParser) -> None:
    p = parser
    _flag(p, "--config", "TOML file with any of these options (flags override it)")
    _flag(
        p, "--broker", "auto (start mosquitto or amqtt), mosquitto, amqtt, mqtt[s]://"
    )
    add_job_flags(p)
    _flag(
        p,
        "--liveness-timeout",
        "seconds of silence before a worker is dead",
        type=float,
    )
    _flag(p, "--max-update-norm", "reject updates with a larger L2 norm", type=float)
    _flag(
        p,
        "--staleness-aware",
        "scale the step by 1/(staleness+1) (default: plain lr)",
        action="store_true",
    )
    _flag(p, "--eval-interval", "seconds between test-set evaluations", type=float)
    _flag(p, "--metrics-interval", "seconds between metrics snapshots", type=float)
    _flag(p, "--checkpoint", "write checkpoints (.npz) to this path")
    _flag(p, "--checkpoint-interval", "seconds between checkpoints", type=float)
    _flag(p, "--resume", "start from this checkpoint")
    _flag(p, "--max-chunk", "chunk size for workers that announce none", type=int)
    _flag(
        p,
        "--no-reject-messages",
        "count dropped pushes without sending REJECT to the worker",
        action="store_false",
        dest="send_rejects",
    )
    _flag(p, "--username", "MQTT user name")
    _flag(p, "--password", "MQTT password")
    _flag(p, "--tls-ca", "CA bundle for the broker's certificate")
    _flag(p, "--tls-cert", "client certificate (with --tls-key)")
    _flag(p, "--tls-key", "client private key")
    _flag(p, "--tls-insecure", "skip broker certificate checks", action="store_true")
    _flag(p, "--hmac-key-file", "shared key: verify and sign messages (HMAC-SHA256)")
    _flag(p, "-v", "debug logging", action="store_true", dest="verbose")
    dashboard.add_arguments(p)


def given(args: argparse.Namespace) -> dict[str, object]:
    """Only the options that were on the command line (everything else is absent)."""
    skip = {"command", "config", "verbose", "_run", "benchmark", "_bench_module"}
    return {k: v for k, v in vars(args).items() if k not in skip}


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from edgeps.commands.serve_config import merge
    from edgeps.runtime.job import Job
    from edgeps.runtime.summary import summary_json, summary_table

    try:
        cfg = merge(given(args), getattr(args, "config", None))
        job = Job(cfg)
        summary = job.run()
    except (
        ValueError,
        TypeError,
        FileNotFoundError,
        ConnectionError,
        RuntimeError,
    ) as exc:
        print(f"edgeps serve: error: {exc}", file=sys.stderr)
        return 2
    print(summary_json(summary) if cfg.json else summary_table(summary))
    return 0
