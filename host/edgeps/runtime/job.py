"""Assemble and run one job: dataset, model, server, MQTT link, coordinator."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import IO, Any

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.admission import Admission
from edgeps.core.balance import Balancer
from edgeps.core.norm_guard import NormGuard
from edgeps.core.privacy import DPMechanism, dp_mechanism
from edgeps.core.server import ParameterServer
from edgeps.core.types import WorkerStats
from edgeps.kernels import params_codec
from edgeps.model.card import ModelCard
from edgeps.model.scaler import Scaler
from edgeps.model.windows import Cut
from edgeps.observe.dashboard import Dashboard, open_dashboard
from edgeps.observe.metrics import MetricsWriter, Progress
from edgeps.observe.privacy import require_accountant
from edgeps.policy import parse_policy
from edgeps.runtime import other_serves
from edgeps.runtime.accounting import sys_subscriptions
from edgeps.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from edgeps.runtime.config import SCALER_FROM_WORKERS, ServeConfig
from edgeps.runtime.connection_flags import connection_options, read_key
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.runtime.exposure import check_keys
from edgeps.runtime.lan import LanBroker, prepare_lan
from edgeps.runtime.scaler_gate import ScalerGate
from edgeps.runtime.summary import Summary
from edgeps.runtime.test_data import (
    builtin_test_data,
    check_resume,
    job_spec,
    load_test_data,
    resumed_scaler,
    worker_hint,
)
from edgeps.runtime.welcome import LocalRounds
from edgeps.transport.broker import BrokerHandle, open_broker
from edgeps.transport.host_link import HostLink

log = logging.getLogger(__name__)


@dataclass
class Model:
    """The model being trained, its card and the held-out data that scores it.

    ``X_test`` is already scaled by the card's scaler, once. With
    ``awaits_scaler`` (``--scaler-from workers``) the card has none yet and
    ``X_test`` is raw until `fix_scaler`.
    """

    spec: Any  # edgeps.kernels.ModelSpec
    X_test: np.ndarray
    y_test: np.ndarray
    card: ModelCard | None = None
    data_name: str = ""  # the dataset or test file, for banners and checkpoints
    awaits_scaler: bool = False
    shape: tuple[int, ...] | None = None  # a window's (C, L), an image's (C, H, W)

    def fix_scaler(self, scaler: Scaler) -> None:
        """The scaler the workers' data fixed: into the card, onto the test rows."""
        if not self.awaits_scaler or self.card is None:
            raise ValueError("this job's scaler is fixed already")
        self.card = replace(self.card, scaler=scaler)
        self.X_test = scaler.transform(self.X_test)
        self.awaits_scaler = False

    def evaluate(self, params: np.ndarray) -> float:
        from edgeps import kernels

        return float(kernels.accuracy(self.spec, params, self.X_test, self.y_test))


def load_model(cfg: ServeConfig) -> Model:
    """The test data (a file or a dataset's split) and the model spec that fits it."""
    from_workers = cfg.scaler_from == SCALER_FROM_WORKERS
    if cfg.test_data is not None:
        cut = Cut(cfg.window, cfg.stride, cfg.group)
        data = load_test_data(cfg.test_data, cfg.label, cfg.scaler_from, cfg.scale, cut)
        if from_workers and cfg.resume is not None:  # fixed in the run it resumes
            data = replace(data, scaler=resumed_scaler(cfg.resume))
    else:
        if cfg.scaler_from is not None:
            raise ValueError("--scaler-from goes with --test-data")
        data = builtin_test_data(cfg.dataset, cfg.seed)
    name = cfg.test_data if cfg.test_data is not None else repr(cfg.dataset)
    spec = job_spec(cfg.model, data, name)
    card = ModelCard(
        spec,
        data.classes if spec.kind != "linear" else None,
        data.scaler,
        data.feature_names,
    )
    X = data.scaler.transform(data.X) if data.scaler is not None else data.X
    shown = str(cfg.test_data or cfg.dataset)
    awaits = from_workers and data.scaler is None
    return Model(spec, X, data.y, card, shown, awaits, data.shape)


def scaler_gate(
    cfg: ServeConfig, model: Model, out: IO[str] | None = None
) -> ScalerGate | None:
    """``--scaler-from workers`` with no scaler yet: HELLOs wait for the workers'.

    ``out`` (serve's banner stream) is told when the scaler is fixed.
    """
    if not model.awaits_scaler:
        return None

    def fixed(scaler: Scaler) -> None:
        model.fix_scaler(scaler)
        if out is not None:
            n = gate.fixed_from
            print(
                f"edgeps serve: feature scaler fixed from the data of "
                f"{n} worker{'' if n == 1 else 's'}, {scaler.n} rows",
                file=out,
                flush=True,
            )

    gate = ScalerGate(
        model.spec.n_features,
        workers=cfg.scaler_workers,
        wait=cfg.scaler_wait,
        on_fixed=fixed,
        shape=model.shape,
    )
    return gate


def read_hmac_key(path: str | None) -> bytes | None:
    """The master key: each worker's key is derived from it (PROTOCOL.md, "Keys")."""
    return read_key(path)


def build_server(cfg: ServeConfig, model: Model) -> tuple[ParameterServer, str]:
    """A ParameterServer at fresh or resumed parameters; also the policy's name."""
    policy = parse_policy(cfg.policy)
    n_params = model.spec.n_params
    ckpt = load_checkpoint(cfg.resume, n_params=n_params) if cfg.resume else None
    if ckpt is not None and model.card is not None and "model" in ckpt.meta:
        check_resume(model.card, ckpt.meta, str(cfg.resume))
    params = ckpt.params if ckpt is not None else model.spec.init_params(cfg.seed)
    server = ParameterServer(
        params,
        policy=policy,
        optimizer=cfg.optimizer,
        lr=cfg.lr,
        lr_workers=cfg.lr_workers,
        server_opt=cfg.server_opt,
        server_lr=cfg.server_lr,
        staleness_aware=cfg.staleness_aware,
        liveness_timeout=cfg.liveness_timeout,
        max_update_norm=cfg.max_update_norm,
        norm_guard=NormGuard(cfg.norm_guard) if cfg.norm_guard > 0 else None,
        balancer=Balancer.for_policy(policy) if cfg.balance else None,
        # anyone on the broker can say HELLO: only pushing workers hold a barrier
        admission=Admission(on_first_push=True),
        dp=serve_dp(cfg),
    )
    if ckpt is not None:
        try:
            restore(server, ckpt)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"--resume {cfg.resume}: {exc}") from None
    return server, str(policy.describe())


def serve_dp(cfg: ServeConfig) -> DPMechanism | None:
    """``--dp``: the core's mechanism (the PS knows no shard: sampling rate 1)."""
    if cfg.dp == "off":
        return None
    require_accountant()  # the one-line install hint before anything starts
    # noise from the OS's entropy: with a known seed anyone could take it off
    return dp_mechanism(cfg.dp, cfg.dp_clip, cfg.dp_noise, seed=None)


def restore(server: ParameterServer, ckpt: Checkpoint) -> None:
    """Put version, optimizer state and worker counters back into a fresh server."""
    try:
        stats = {
            str(wid): WorkerStats(
                accepted=int(s["accepted"]),
                rejected={str(k): int(v) for k, v in s["rejected"].items()},
                max_staleness=int(s["max_staleness"]),
            )
            for wid, s in ckpt.worker_stats.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"checkpoint has malformed worker stats: {exc!r}") from exc
    server.restore(
        version=ckpt.version,
        optimizer_state=ckpt.optimizer_state or None,
        worker_stats=stats,
    )


def make_checkpointer(cfg: ServeConfig, model: Model) -> Callable[[Coordinator], None]:
    path = cfg.checkpoint
    assert path is not None

    def write(coord: Coordinator) -> None:
        version, params = coord.server.params_snapshot()
        optimizer = coord.server.model.optimizer
        stats = {
            wid: {
                "accepted": s.accepted,
                "rejected": dict(s.rejected),
                "max_staleness": s.max_staleness,
            }
            for wid, s in coord.server.stats().items()
        }
        save_checkpoint(
            path,
            Checkpoint(
                params=params,
                version=int(version),
                optimizer_state=optimizer.state_dict(),
                worker_stats=stats,
                meta={
                    **(model.card.to_dict() if model.card is not None else {}),
                    "job": cfg.job,
                    "model": str(model.spec),
                    "dataset": model.data_name,
                    "policy": cfg.policy,
                    "accuracy": coord.accuracy,
                },
            ),
        )
        log.info("checkpoint v%d written to %s", version, path)

    return write


@contextmanager
def stop_on_signals(coord: Coordinator) -> Iterator[None]:
    """SIGINT/SIGTERM ask the loop to finish (final checkpoint included)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        log.info("signal %d: finishing the job", signum)
        coord.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Job:
    """One configured job; `run()` blocks until it ends and returns the summary."""

    def __init__(
        self,
        cfg: ServeConfig,
        *,
        broker: BrokerHandle | None = None,
        out: IO[str] | None = None,
        prefer_broker: str = "mosquitto",
        banner: bool = True,
        gc_freeze: bool = False,
    ) -> None:
        self.gc_freeze = gc_freeze  # edgeps.runtime.gc_freeze: for a process of its own
        if not wire.valid_id(cfg.job):
            raise ValueError(f"--job must match [A-Za-z0-9_-]{{1,32}}, got {cfg.job!r}")
        self.lan: LanBroker | None = None
        if broker is None:
            # a LAN broker comes with credentials, ACLs and keys (runtime.lan)
            cfg, self.lan = prepare_lan(cfg)
        check_keys(cfg)  # off loopback: per-device keys, or --insecure
        self.cfg = cfg
        self.hmac_key = read_hmac_key(cfg.hmac_key_file)
        self.options = connection_options(cfg)
        self.model = load_model(cfg)
        self.server, self.policy_name = build_server(cfg, self.model)
        self._own_broker = broker is None
        self._broker = broker
        self._prefer = prefer_broker
        self.out = out if out is not None else sys.stderr
        self.coordinator: Coordinator | None = None
        self.ready = threading.Event()
        self.banner = banner  # say where workers should connect
        self._dash: Dashboard | None = None

    @property
    def broker(self) -> BrokerHandle:
        if self._broker is None and self.lan is not None:
            self._broker = self.lan.start()
        elif self._broker is None:
            self._broker = open_broker(self.cfg.broker, prefer=self._prefer)
        return self._broker

    def open_dashboard(self) -> Dashboard | None:
        """The dashboard asked for, started once; RuntimeError if it cannot listen.

        `run` starts it; a caller that runs the job in a thread calls this
        first, so a taken port is an error line in its own thread.
        """
        if self._dash is None:
            cfg = self.cfg
            self._dash = open_dashboard(
                cfg.dashboard, cfg.dashboard_token_file, self.out
            )
        return self._dash

    def _look_for_other_serves(self) -> other_serves.Found:
        """RuntimeError while another serve of this job is alive, unless takeover."""
        url = self.broker.url
        found = other_serves.look(self.options.at(url), self.cfg.job)
        if found.live_run is not None:
            if not self.cfg.takeover:
                raise RuntimeError(
                    other_serves.refusal(self.cfg.job, found.live_run, url)
                )
            log.warning(
                "taking over job %s from the live serve of run %016x (--takeover)",
                self.cfg.job,
                found.live_run,
            )
        return found

    def stop(self) -> None:
        if self.coordinator is not None:
            self.coordinator.stop()

    def run(self) -> Summary:
        cfg = self.cfg
        metrics = MetricsWriter(cfg.metrics_out) if cfg.metrics_out else None
        client: HostLink | None = None
        dash: Dashboard | None = None
        try:
            dash = self.open_dashboard()
            found = self._look_for_other_serves()
            client = HostLink(
                self.options.at(self.broker.url),
                client_id=f"edgeps-host-{cfg.job}",
                subscriptions=[
                    (wire.topic_up_wildcard(cfg.job), 1),
                    (
                        wire.topic_model(cfg.job),
                        1,
                    ),  # ModelGuard, OtherServes
                    *sys_subscriptions(),
                ],
            )
            # a crash clears the presence after 1.5 keepalives
            client.will_set(other_serves.topic_host(cfg.job), b"", 1, True)
            client.start()
            if self.banner:
                b = self.broker
                started = "" if b.kind == "external" else f" ({b.kind}, started here)"
                url = b.url if self.lan is None else self.lan.board_url
                cut = Cut(cfg.window, cfg.stride, cfg.group)
                hint = worker_hint(cfg.label, cut) if cfg.test_data else ""
                print(
                    f"edgeps serve: job {cfg.job} on {url}{started}; policy "
                    f"{self.policy_name}, model {self.model.spec}, data "
                    f"{self.model.data_name}; workers: edgeps worker --broker "
                    f"{url} --job {cfg.job} --id ID {hint}"
                    "...",
                    file=self.out,
                    flush=True,
                )
                for line in self.lan.instructions() if self.lan is not None else ():
                    print(f"edgeps serve: {line}", file=self.out, flush=True)
                if self.model.awaits_scaler:
                    print(
                        f"edgeps serve: the feature scaler comes from the data of "
                        f"{cfg.scaler_workers} workers; they are welcomed once it "
                        f"is fixed (at most {cfg.scaler_wait:g} s after the first)",
                        file=self.out,
                        flush=True,
                    )
            settings = Settings(
                job=cfg.job,
                model=str(self.model.spec),
                target_accuracy=cfg.target_accuracy,
                max_time=cfg.max_time,
                eval_interval=cfg.eval_interval,
                metrics_interval=cfg.metrics_interval,
                checkpoint_interval=cfg.checkpoint_interval,
                checkpoint_path=None if cfg.checkpoint is None else str(cfg.checkpoint),
                max_chunk=cfg.max_chunk,
                send_rejects=cfg.send_rejects,
                hmac_key=self.hmac_key,
                compress=cfg.compress,
                params_code=params_codec.parse_code(cfg.compress_down),
                shared_releases=cfg.shared_releases,
                gc_freeze=self.gc_freeze,
                dp_delta=cfg.dp_delta,
                dp_epsilon_budget=cfg.dp_epsilon_budget,
                local=LocalRounds(
                    cfg.local_steps, cfg.local_epochs, cfg.local_time, cfg.lr
                ),
                card=self.model.card,
            )
            coord = Coordinator(
                self.server,
                client,
                settings,
                policy_name=self.policy_name,
                evaluate=self.model.evaluate,
                on_checkpoint=(
                    make_checkpointer(cfg, self.model) if cfg.checkpoint else None
                ),
                metrics=metrics,
                progress=None if cfg.quiet else Progress(self.out),
                observer=dash.publish if dash is not None else None,
                gate=scaler_gate(cfg, self.model, self.out if self.banner else None),
            )
            self.coordinator = coord
            if found.model_run is not None and found.live_run is None:
                coord.other_serves.ignore.add(found.model_run)  # a crashed run's
            presence = other_serves.Presence(
                cfg.job, coord.run_id, str(self.model.spec), self.server.n_params
            )
            announce = client.publish  # queues: safe on the network thread

            def link_up() -> None:
                coord.link_up()
                announce(presence.topic, presence.payload(), 1, True)

            announce(presence.topic, presence.payload(), 1, True)
            client.on_up = link_up
            self.ready.set()
            with stop_on_signals(coord):
                summary = coord.run()
                if dash is not None:
                    dash.linger(cfg.dashboard_linger, coord.stop_event, self.out)
            client.publish(presence.topic, b"", 1, True)  # this serve is gone
            client.flush(5.0)  # let the final MODEL 'done' reach the broker
            if coord.other_serves.seen:
                log.warning(
                    "job %s: another serve's MODEL was seen %d times during this run",
                    cfg.job,
                    coord.other_serves.seen,
                )
            return summary
        finally:
            self.ready.set()
            if dash is not None:
                dash.close()
            if client is not None:
                client.stop()
            if metrics is not None:
                metrics.close()
            if self._own_broker and self._broker is not None:
                self._broker.close()
