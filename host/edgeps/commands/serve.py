"""`edgeps serve`: run the host coordinator (parameter server) for one job over MQTT.

Every flag defaults to "not given", so the merge order is plain: built-in
defaults, then ``--config FILE.toml``, then the flags on the command line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from edgeps.observe import dashboard

SUPPRESS = argparse.SUPPRESS


EXAMPLES = """examples:
  edgeps serve --job lab --target-accuracy 0.93 --max-time 300
  edgeps serve --broker mqtts://broker.lan:8883 --tls-ca ca.pem --username host \\
      --password-file host.pass --job lab --policy ssp:3 --model mlp:64
  edgeps serve --config lab.toml --max-time 60   (flags override the file)
  edgeps serve --test-data iris_test.csv --label species --model mlp:16 \
      --checkpoint iris.npz --target-accuracy 0.95
  edgeps serve --lan --boards esp-1,esp-2,pi-1 --job lab   (a locked-down broker
      for boards on the LAN: credentials, ACLs and keys in edgeps-lab/)
  edgeps serve --lan --lan-tls --boards esp-1,pi-1 --job lab   (the same on TLS,
      port 8883, with the job's own CA in edgeps-lab/tls/ca.pem)

Without --target-accuracy and --max-time the run stops after 600 s.
Exit codes: 0 done; 1 done, but the final --checkpoint could not be saved (the
summary names the last version saved); 2 bad flags, files or broker."""


def _flag(
    p: argparse.ArgumentParser,
    name: str,
    help_text: str,
    defaults: dict[str, object] | None = None,
    **kw: object,
) -> None:
    from edgeps.runtime.config import ServeConfig

    dest = str(kw.get("dest") or name.lstrip("-").replace("-", "_"))
    default = (defaults or {}).get(dest, getattr(ServeConfig, dest, None))
    if default is not None and not isinstance(default, bool):
        help_text = f"{help_text} (default: {default})"
    elif isinstance(default, bool) and default:
        help_text = f"{help_text} (default: on)"
    p.add_argument(name, default=SUPPRESS, help=help_text, **kw)  # type: ignore[arg-type]


def add_job_flags(
    p: argparse.ArgumentParser, defaults: dict[str, object] | None = None
) -> None:
    """Flags shared by `serve` and `demo`: what to train and how to synchronize."""
    from edgeps.runtime.model_forms import EXAMPLES as MODEL_EXAMPLES

    d = defaults
    on_off = argparse.BooleanOptionalAction
    _flag(p, "--job", "job id: 1-32 of [A-Za-z0-9_-]", d)
    _flag(p, "--policy", "sync policy: bsp, asp, ssp:3, dsp, dsp:w=8, kofn:k=6, ...", d)
    _flag(
        p,
        "--model",
        f"model: a short form the dataset completes ({MODEL_EXAMPLES}) or a "
        "full spec like mlp:30-32-6 (default: the dataset's)",
        d,
    )
    _flag(
        p,
        "--dataset",
        "sensors (built in), digits, breast_cancer, mnist, fashion-mnist, "
        "mnist1d, basicmotions (host/README.md, Datasets)",
        d,
    )
    _flag(p, "--seed", "seed for data split and initial parameters", d, type=int)
    _flag(p, "--lr", "learning rate", d, type=float)
    _flag(
        p,
        "--local-steps",
        "SGD steps each worker takes between two pushes, then pushes the model "
        "delta (1: push every gradient)",
        d,
        type=int,
        metavar="H",
    )
    _flag(
        p,
        "--local-epochs",
        "passes over each worker's data per push, instead of --local-steps (0: off)",
        d,
        type=float,
        metavar="E",
    )
    _flag(
        p,
        "--local-time",
        "seconds of local training per push, instead of --local-steps (0: off)",
        d,
        type=float,
        metavar="S",
    )
    _flag(
        p,
        "--server-opt",
        "how the host applies workers' deltas: sgd, momentum or adam (FedOpt)",
        d,
        choices=("sgd", "momentum", "adam"),
    )
    _flag(p, "--server-lr", "the step the host applies deltas with", d, type=float)
    _flag(
        p,
        "--lr-workers",
        "past this many live workers each push steps by lr x R / workers, so "
        "more workers never make a larger step; 0: always the plain lr",
        d,
        type=int,
        metavar="R",
    )
    _flag(p, "--optimizer", "sgd, momentum or adam", d)
    _flag(p, "--target-accuracy", "stop at this test accuracy (0..1]", d, type=float)
    _flag(p, "--compress", "UPDATE code workers send: f32, f16, int8, topk:F", d)
    max_help = "stop after this many seconds"
    if "max_time" not in (d or {}):
        from edgeps.runtime.config import DEFAULT_MAX_TIME

        max_help += f" (default: {DEFAULT_MAX_TIME:g} without --target-accuracy)"
    _flag(p, "--max-time", max_help, d, type=float)
    _flag(p, "--metrics-out", "append JSON-lines metrics snapshots to this file", d)
    _flag(p, "--json", "print the final summary as JSON", d, action=on_off)
    _flag(p, "--quiet", "no live progress display", d, action=on_off)


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.runtime.config import KEYS, ServeConfig
    from edgeps.runtime.connection_flags import add_connection_flags
    from edgeps.runtime.privacy_flags import add_dp_flags

    p = parser
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EXAMPLES
    _flag(
        p,
        "--config",
        "TOML file with any of these options, named as the flags without "
        f"dashes in front (e.g. target-accuracy = 0.93); flags override it. "
        f"Keys: {', '.join(KEYS)}",
        metavar="FILE",
    )
    defaults = ServeConfig().to_dict()
    add_connection_flags(
        p,
        broker_help="auto (start mosquitto, else amqtt), mosquitto, amqtt, or "
        "mqtt[s]://HOST[:PORT] of a running broker",
        defaults=defaults,
        layered=True,
    )
    add_job_flags(p)
    _flag(
        p,
        "--takeover",
        "run even while another serve of this job is alive (refused otherwise: "
        "two serves of one job both train it)",
        action="store_true",
    )
    on_off = argparse.BooleanOptionalAction
    _flag(
        p,
        "--test-data",
        "evaluate on this CSV or NPZ (instead of --dataset): it fixes the "
        "features, the classes (text labels: their sorted names) and the scaler",
        metavar="FILE",
    )
    _flag(p, "--label", "the label column's name in CSV files (default: the last)")
    _flag(
        p,
        "--window",
        "--test-data is a CSV of raw samples (one per row): cut it into windows "
        "of L samples, never across a change of label or --group",
        type=int,
        metavar="L",
    )
    _flag(p, "--stride", "with --window: a window every S samples", type=int)
    _flag(p, "--group", "with --window: the recording or subject column", metavar="COL")
    _flag(
        p,
        "--scaler-from",
        "compute the feature scaler from this CSV or NPZ, or 'workers': from "
        "the moments (rows, means, variances) of the workers' own data, "
        "combined before anyone is welcomed (default: --test-data)",
        metavar="FILE|workers",
    )
    _flag(
        p,
        "--scaler-workers",
        "with --scaler-from workers: fix the scaler once this many workers "
        "sent their data's moments",
        type=int,
        metavar="K",
    )
    _flag(
        p,
        "--scaler-wait",
        "with --scaler-from workers: or this many seconds after the first "
        "moments arrived, with fewer",
        type=float,
        metavar="S",
    )
    _flag(
        p,
        "--scale",
        "with --test-data, standardise features by the job's scaler (every "
        "worker gets it in its WELCOME)",
        action=on_off,
    )
    _flag(
        p,
        "--liveness-timeout",
        "seconds of silence before a worker is dead",
        type=float,
    )
    _flag(p, "--max-update-norm", "reject updates with a larger L2 norm", type=float)
    _flag(
        p,
        "--norm-guard",
        "reject updates whose L2 norm is above K times the median of the last 64 "
        "applied (once 8 were applied); 0 turns it off",
        type=float,
        metavar="K",
    )
    _flag(
        p,
        "--staleness-aware",
        "scale the step by 1/(staleness+1) (default: plain lr)",
        action=on_off,
    )
    _flag(
        p,
        "--balance",
        "assign each worker its batch from the monitor so iteration times even "
        "out, and weight each push by its samples (base batch 32); from a "
        "board's first push for policies that wait for whole rounds (bsp, "
        "kofn), after its third for asp, dsp, ssp and dssp",
        action=on_off,
    )
    _flag(p, "--eval-interval", "seconds between test-set evaluations", type=float)
    _flag(p, "--metrics-interval", "seconds between metrics snapshots", type=float)
    _flag(p, "--checkpoint", "write checkpoints (.npz) to this path")
    _flag(p, "--checkpoint-interval", "seconds between checkpoints", type=float)
    _flag(p, "--resume", "start from this checkpoint")
    _flag(p, "--max-chunk", "chunk size for workers that announce none", type=int)
    _flag(
        p,
        "--send-rejects",
        "send REJECT to a worker whose push was dropped (--no-send-rejects: "
        "only count it)",
        action=on_off,
    )
    _flag(
        p,
        "--compress-down",
        "PARAMS code of releases: f32 (default), f16 or int8 (block scale)",
        choices=("f32", "f16", "int8"),
    )
    _flag(
        p,
        "--shared-releases",
        "publish a release of several workers once on edgeps/J/params/shared and "
        "send each a small signed RELEASE (default; --no-shared-releases: a full "
        "PARAMS to each)",
        action=on_off,
    )
    _flag(
        p,
        "--allow-unsigned",
        "run on a broker reachable from other machines without per-device keys "
        "(--hmac-key-file); refused without this",
        action="store_true",
    )
    _flag(
        p,
        "--lan",
        "start mosquitto for boards on a LAN (with --broker auto or mosquitto): "
        "no anonymous clients, a password and ACL per board, per-device keys, "
        "all written to --job-dir; prints what each board needs",
        action="store_true",
    )
    _flag(
        p,
        "--listen",
        "HOST:PORT of the LAN broker (implies --lan; default 0.0.0.0:1883)",
        metavar="HOST:PORT",
    )
    _flag(p, "--boards", "the ids of the boards --lan lets in, comma-separated")
    _flag(p, "--job-dir", "where --lan writes its files (default: edgeps-JOB)")
    _flag(
        p,
        "--lan-tls",
        "TLS on the LAN listener (default port 8883): a CA and a certificate for "
        "this machine, made once in JOB-DIR/tls; boards trust tls/ca.pem",
        action="store_true",
    )
    _flag(p, "--lan-cert", "the LAN listener's certificate (PEM; implies --lan-tls)")
    _flag(p, "--lan-key", "the private key of --lan-cert (PEM)")
    dashboard.add_arguments(p)
    add_dp_flags(p, layered=True)


def given(args: argparse.Namespace) -> dict[str, object]:
    """Only the options that were on the command line (everything else is absent)."""
    skip = {"command", "config", "benchmark"}
    return {
        k: v for k, v in vars(args).items() if k not in skip and not k.startswith("_")
    }


def _note(text: str) -> None:
    print(f"edgeps serve: {text}", file=sys.stderr)


def check_reachable(broker: str) -> None:
    """ConnectionError when a running broker named by URL cannot be reached:
    a mistyped host or a closed port, said before anything else about it."""
    from edgeps.transport.broker import BROKER_KINDS
    from edgeps.transport.reach import unreachable

    if broker in BROKER_KINDS:
        return  # started here
    why = unreachable(broker)
    if why is not None:
        raise ConnectionError(why)


def raw_features_note(cfg: Any, model: Any) -> str | None:
    """What to say when ``--no-scale`` leaves a job on features that look raw:
    such a job often sits at chance, and nothing else would say why."""
    if cfg.scale or cfg.test_data is None or model.card is None:
        return None
    if model.card.scaler is not None or model.awaits_scaler:
        return None
    from edgeps.pyworker.scaling import looks_unscaled

    if not looks_unscaled(model.X_test):
        return None
    X = model.X_test
    return (
        f"--no-scale: the features of {cfg.test_data} look unscaled (mean up to "
        f"{float(abs(X.mean(axis=0)).max()):.3g}, std up to "
        f"{float(X.std(axis=0).max()):.3g}): the job has no scaler and may "
        "train slowly or sit at chance; without --no-scale the job standardises "
        "them for every worker"
    )


def run(args: argparse.Namespace) -> int:
    from edgeps.runtime.config import merge
    from edgeps.runtime.connection_flags import setup_logging
    from edgeps.runtime.exposure import exposed_broker
    from edgeps.runtime.job import Job
    from edgeps.runtime.summary import summary_json, summary_table

    try:
        cfg = merge(given(args), getattr(args, "config", None), note=_note)
        setup_logging(cfg.log_level, timestamps=False)
        if exposed_broker(cfg) is not None:
            check_reachable(cfg.broker)  # a typo is not a key problem: said first
        job = Job(cfg, gc_freeze=True)  # serve has the process to itself
        check_reachable(cfg.broker)  # flags checked first, then the network
        note = raw_features_note(cfg, job.model)
        if note:
            _note(f"warning: {note}")
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
    # the run is over but what it learned is not on disk: scripts must notice
    return 1 if summary.checkpoint_lost else 0
