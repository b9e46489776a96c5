"""`edgeps worker`: a CPython worker (Raspberry Pi, any Linux box) on the shared loop.

It plugs a paho-mqtt transport and the C-kernel trainer into the same
``edgeps_worker.worker.Worker`` the ESP32 boards run. Before joining, it
reads the job's retained MODEL message so the model comes from the host and
a local data file that does not fit it is refused with a clear error.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.pyworker.model_fetch import fetch_model
from edgeps.runtime.connection_flags import (
    add_connection_flags,
    connection_options,
    read_worker_key,
    setup_logging,
)
from edgeps.runtime.model_forms import EXAMPLES, complete_model
from edgeps.runtime.window_flags import add_window_flags
from edgeps.transport.paho_link import MqttLink

log = logging.getLogger("edgeps.commands.worker")

EXIT_OK = 0
EXIT_CONFIG = 2  # bad flags, data or model mismatch: retrying will not help
EXIT_UNREACHABLE = 3  # no broker at --broker within --give-up seconds
# a Pi has the memory for whole-model messages; one message per PARAMS/UPDATE
# also avoids a Nagle stall between chunks on brokers without TCP_NODELAY
CPYTHON_MAX_CHUNK = 1 << 16
# a HELLO the host cannot check (another key, a typo in the key file) is
# dropped there without an answer: the worker alone can notice the silence
NO_ANSWER = "no answer from the job: check the job id and the key (--hmac-key-file)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  edgeps worker --broker mqtt://192.168.1.10:1883 --job lab --id pi-1 "
        "--data local.csv\n"
        "  edgeps worker --broker mqtts://broker.lan:8883 --tls-ca ca.pem "
        "--username pi-1 \\\n"
        "      --password-file /etc/edgeps/mqtt.pass --job lab --id pi-1 "
        "--emulated sensors:0/4\n"
        "  edgeps worker --infer --model-file model.bin --data rows.csv\n"
        "  edgeps worker --infer --fetch --broker mqtt://192.168.1.10:1883 "
        "--job lab --id pi-9 \\\n"
        "      --hmac-key-file pi-9.key --data rows.csv"
    )
    # --broker is needed to train or to --publish, not to --infer alone
    add_connection_flags(parser, defaults={"log_level": "info", "broker": None})
    parser.add_argument("--job", help="job id, as given to serve (needed to train)")
    parser.add_argument("--id", dest="worker_id", help="worker id (needed to train)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="CSV (label last) or NPZ (arrays X, y)")
    src.add_argument(
        "--emulated", metavar="DATASET[:PART/N]", help="a shard of a built-in dataset"
    )
    parser.add_argument("--non-iid", action="store_true", help="label-skewed shards")
    parser.add_argument(
        "--label", help="the label column's name in a CSV --data (default: the last)"
    )
    parser.add_argument(
        "--classes",
        metavar="A,B,...",
        help="the job's class names, in order, for text labels (serve prints "
        "them); default: this file's sorted names",
    )
    add_window_flags(parser)
    parser.add_argument(
        "--part",
        metavar="I/N",
        help="with --window and --group: train on the whole groups (subjects, "
        "recordings) dealt to worker I of N, one each when there are N",
    )
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument(
        "--scale",
        action="store_true",
        help="standardise features by this file's own mean and std (for a job "
        "with a scaler: serve says so)",
    )
    scale.add_argument(
        "--scaler-from",
        metavar="FILE",
        help="standardise features by the scaler of this CSV or NPZ (the file "
        "given to serve's --scaler-from)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="data split and shuffle (default: 0)"
    )
    parser.add_argument(
        "--batch", type=int, default=JOB.batch, help=f"minibatch (default: {JOB.batch})"
    )
    parser.add_argument(
        "--model",
        help=f"refuse a job that trains another model; full or short ({EXAMPLES})",
    )
    parser.add_argument(
        "--max-iterations", type=int, default=0, help="stop after N (default 0: never)"
    )
    parser.add_argument(
        "--persist",
        action="store_true",
        help="after the job is done, wait for its next run (for services)",
    )
    parser.add_argument(
        "--give-up",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="without --persist: exit (code 3) when the broker cannot be reached "
        "for this long at start (default: 30); with --persist it retries for ever",
    )
    parser.add_argument(
        "--instance",
        "--incarnation",
        dest="instance",
        type=int,
        default=0,
        help="names this process to the host (default: random)",
    )
    parser.add_argument(
        "--release-timeout",
        type=float,
        default=15.0,
        metavar="S",
        help="ask again (HELLO) when no release came for S seconds (default: 15)",
    )
    parser.add_argument(
        "--max-chunk",
        type=int,
        default=CPYTHON_MAX_CHUNK,
        help=f"largest message to send or receive (default: {CPYTHON_MAX_CHUNK} B)",
    )
    parser.add_argument(
        "--model-out",
        metavar="PATH",
        help="when the job is done, write its final model here (the board's "
        "model file, for --infer or a board)",
    )
    infer = parser.add_argument_group(
        "inference: predict each --data row with a board's model file, no training"
    )
    infer.add_argument("--infer", action="store_true", help="predict, do not train")
    infer.add_argument(
        "--model-file",
        default="model.bin",
        help="from `edgeps export --format micropython` (default: model.bin)",
    )
    infer.add_argument(
        "--fetch",
        action="store_true",
        help="first take the job's current model into --model-file: join it "
        "(--broker, --job, --id, its key) for one release, never train",
    )
    infer.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="--fetch from a broker off loopback without --hmac-key-file "
        "(a forged model would be written)",
    )
    infer.add_argument(
        "--publish",
        action="store_true",
        help="also publish each prediction (QoS 0) on edgeps/JOB/pred/ID",
    )
    dp = parser.add_argument_group(
        "local differential privacy (serve the job with --dp local, same C and SIGMA)"
    )
    dp.add_argument(
        "--dp-clip",
        type=float,
        metavar="C",
        help="clip each gradient to L2 norm C and add noise before sending "
        "(default: off)",
    )
    dp.add_argument(
        "--dp-noise",
        type=float,
        default=JOB.dp_noise,
        metavar="SIGMA",
        help=f"with --dp-clip: noise N(0, (SIGMA x C)^2) (default: {JOB.dp_noise:g})",
    )


def _validate(args: argparse.Namespace) -> None:
    if not args.infer and not (args.broker and args.job and args.worker_id):
        raise ValueError("a training worker needs --broker, --job and --id")
    if args.publish and not args.broker:
        raise ValueError("--publish needs --broker")
    if args.infer and not args.data:
        raise ValueError("--infer predicts the rows of a --data file")
    if args.publish and not args.infer:
        raise ValueError("--publish applies to --infer")
    if not args.give_up > 0:
        raise ValueError(f"--give-up must be > 0 seconds, got {args.give_up}")
    if args.fetch and not (args.infer and args.broker and args.job and args.worker_id):
        raise ValueError("--fetch goes with --infer, --broker, --job and --id")
    if args.allow_unsigned and not args.fetch:
        raise ValueError("--allow-unsigned applies to --fetch")
    if args.fetch:
        from edgeps.runtime.exposure import check_fetch_keys

        check_fetch_keys(args.broker, args.hmac_key_file, args.allow_unsigned)
    if args.model_out and args.infer:
        raise ValueError("--model-out applies to training; --infer reads --model-file")
    if args.infer:  # a job and an id only name the topic: defaults do
        args.job, args.worker_id = args.job or "local", args.worker_id or "worker"
    from edgeps_worker import wire

    for flag, value in (("--job", args.job), ("--id", args.worker_id)):
        if not wire.valid_id(value):
            raise ValueError(f"{flag} must match [A-Za-z0-9_-]{{1,32}}, got {value!r}")
    if args.batch < 1:
        raise ValueError("--batch must be at least 1")
    if args.max_iterations < 0:
        raise ValueError("--max-iterations must be >= 0")
    if args.instance < 0 or args.instance >= 2**64:
        raise ValueError("--instance must be in 0..2**64-1")
    if not 256 <= args.max_chunk <= wire.MAX_MESSAGE // 2:
        raise ValueError(f"--max-chunk must be in 256..{wire.MAX_MESSAGE // 2}")
    if args.dp_clip is not None:
        from edgeps.core.privacy import check_dp

        check_dp("local", args.dp_clip, args.dp_noise)
    if not 0.1 <= args.release_timeout <= 3600:
        raise ValueError("--release-timeout must be in 0.1..3600 seconds")
    if args.non_iid and not args.emulated:
        raise ValueError("--non-iid applies to --emulated data only")
    data_only = ("--label", "--classes", "--scale", "--scaler-from", "--window")
    if args.part and not args.group:
        raise ValueError("--part deals whole groups: give --window and --group")
    for flag in data_only:
        if getattr(args, flag[2:].replace("-", "_")) and not args.data:
            raise ValueError(f"{flag} applies to --data files only")


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)

    from edgeps.kernels import ModelSpec
    from edgeps.pyworker.localdata import load_emulated
    from edgeps.pyworker.scaling import check_classes, load_local
    from edgeps.pyworker.trainer import NativeTrainer

    try:
        _validate(args)
        if args.infer:
            from edgeps.commands.worker_infer import run_infer

            return run_infer(args)
        if args.data:
            data = load_local(args)
        else:
            scheme = "dirichlet:0.5" if args.non_iid else "iid"
            data, _ = load_emulated(args.emulated, args.seed, scheme)
        transport = MqttLink(connection_options(args), args.worker_id)
        key = read_worker_key(args.hmac_key_file, args.worker_id)
        if args.model:  # a full spec fails early; a short one waits for the job
            ModelSpec.parse(complete_model(args.model, data.n_features, 2, data.shape))
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return EXIT_CONFIG

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    log.info(
        "worker %s: %d local samples from %s",
        args.worker_id,
        data.n_samples,
        data.source,
    )
    why = reach(args, stop)
    if why is not None:
        log.error(
            "%s; gave up after %g s (--persist keeps retrying)", why, args.give_up
        )
        return EXIT_UNREACHABLE
    runs = 0
    while not stop.is_set():
        job = fetch_model(transport, args.job, stop=stop.is_set, want_running=runs > 0)
        if job is None:
            return EXIT_OK
        if job.state != "running":
            # MODEL is unsigned: its "done" cannot end a worker that holds no
            # session; it waits for a running MODEL (logged every 30 s)
            if runs == 0:
                log.info("job %s says done; waiting for it to run", args.job)
            runs += 1
            continue
        try:
            spec = ModelSpec.parse(job.model)
            if args.model:
                n_classes = max(2, spec.n_classes)
                want = complete_model(
                    args.model, spec.n_features, n_classes, data.shape
                )
                expected = ModelSpec.parse(want)
                if str(expected) != str(spec):
                    raise ValueError(f"job {args.job} trains {spec}, not {expected}")
            check_classes(spec, data, given=args.classes is not None)
            trainer = NativeTrainer(
                spec, data, batch=args.batch, seed=args.seed, local_dp=local_dp(args)
            )
        except ValueError as exc:
            log.error("%s", exc)
            return EXIT_CONFIG
        reason = _train(args, transport, trainer, stop, key)
        runs += 1
        if reason == "model_mismatch":
            log.error("the job's model does not fit this worker's data")
            return EXIT_CONFIG
        if reason == "codec":
            log.error(
                "job %s asks for an update format this worker cannot make", args.job
            )
            return EXIT_CONFIG
        if reason == "duplicate_id":
            log.error(
                "worker id %s is in use by another live worker of job %s: "
                "give this one another --id",
                args.worker_id,
                args.job,
            )
            return EXIT_CONFIG
        if reason != "done" or not args.persist:
            return EXIT_OK
    return EXIT_OK


def reach(args: argparse.Namespace, stop: threading.Event) -> str | None:
    """Why the broker cannot be reached within --give-up (None: it can, or
    --persist, where a service keeps retrying with backoff)."""
    from edgeps.transport.reach import at_start

    return at_start(args.broker, args.give_up, persist=args.persist, stop=stop.is_set)


def local_dp(args: argparse.Namespace) -> Any:
    """``--dp-clip``: the trainer's LocalDP (noise from OS entropy); None: off."""
    if args.dp_clip is None:
        return None
    from edgeps.pyworker.local_dp import LocalDP

    return LocalDP(args.dp_clip, args.dp_noise)


def _train(
    args: argparse.Namespace,
    transport: MqttLink,
    trainer: Any,
    stop: threading.Event,
    key: bytes | None,
) -> str:
    """One run of the job on the shared worker loop; returns its stop reason."""
    from edgeps_worker.worker import Worker

    if args.model_out:  # keeps what the model file needs (pyworker.keep)
        from edgeps.pyworker.keep import Keeping

        trainer = Keeping(trainer)
    joined: list[Worker] = []

    def note(text: str) -> None:
        log.info("%s", text)
        # a release timeout before any WELCOME: the host never answered
        if joined and joined[0].session is None and text.endswith("re-HELLO"):
            log.warning(
                "%s (job %s sent no WELCOME in %g s)",
                NO_ANSWER,
                args.job,
                args.release_timeout,
            )

    worker = Worker(
        transport,
        trainer,
        args.job,
        args.worker_id,
        instance=args.instance,
        max_iterations=args.max_iterations,
        stop=stop.is_set,
        max_chunk=args.max_chunk,
        key=key,
        log=note,
        release_timeout_ms=max(1, round(args.release_timeout * 1000)),
    )
    joined.append(worker)
    log.info(
        "joining job %s with model %s, instance %016x",
        args.job,
        trainer.model,
        worker.instance,
    )
    reason: str = worker.run()
    stats = " ".join(f"{k}={v}" for k, v in worker.stats.items())
    log.info(
        "stopped (%s) at clock %d, loss %.4f: %s",
        reason,
        worker.clock,
        worker.last_loss,
        stats,
    )
    if reason == "done" and args.model_out:
        from edgeps.pyworker.keep import write_model

        try:
            if write_model(worker, args.model_out):
                log.info("kept the job's model in %s", args.model_out)
            else:
                log.warning("no complete release to keep in %s", args.model_out)
        except OSError as exc:
            log.error("cannot write %s: %s", args.model_out, exc)
    return reason
