"""Drive the real ParameterServer with simulated boards in virtual time.

Gradients are real (``edgeps.kernels`` on real data), so accuracy over time is
real; only durations come from the scenario's worker profiles. Each board
draws its minibatches as an emulated sensor's trainer does (``edgeps.pyworker.
batches``, seeded with seed + index), and a rejoin starts that order and the
error-feedback residual again, as a new process does. Messages cross
a link with delay, jitter and loss; a lost message or a lost acknowledgement is
sent again after ``retry_timeout``, as MQTT QoS 1 does, so the core also sees
redeliveries. On a shaped link (a profile with a link rate, or
``SimConfig.link_*``) a message instead arrives when ``edgeps.sim.links``
says: one-way delay + its real bytes through a token bucket + a timeout per
lost TCP segment, never lost. A crashed board goes silent (the core finds
out through ``tick``) and later rejoins as a new incarnation.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import numpy as np

from edgeps import kernels
from edgeps.codecs import F32, GradEncoder, decode_update, parse_compress
from edgeps.core.admission import Admission
from edgeps.core.balance import Balancer
from edgeps.core.defaults import JOB
from edgeps.core.divergence import DivergenceWatch
from edgeps.core.norm_guard import NormGuard
from edgeps.core.privacy import dp_mechanism, privatize
from edgeps.core.server import ParameterServer
from edgeps.core.sink import carry_out
from edgeps.core.types import (
    Applied,
    Event,
    Heartbeat,
    Held,
    Join,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
)
from edgeps.kernels import params_codec
from edgeps.model.windows import check_fits
from edgeps.netem.links import is_shaped, with_links
from edgeps.observe.privacy import make_ledger
from edgeps.policy import parse_policy
from edgeps.runtime.model_forms import complete_model
from edgeps.sim.energy import BoardMeter, BoardTime, board_joules, board_power
from edgeps.sim.engine import EventLoop
from edgeps.sim.links import EMULATED_CHUNK, SimLink, message_bytes
from edgeps.sim.local import local_update, plan_steps
from edgeps.sim.types import SimConfig, SimResult
from edgeps.sim.worker import SimWorker
from edgeps.workloads.datasets import Dataset, load_dataset, partition
from edgeps.workloads.scenarios import make_scenario

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=8)
def _dataset(name: str, seed: int) -> Dataset:
    return load_dataset(name, seed)


class Simulator:
    """One run of one policy on one scenario; ``run()`` returns a ``SimResult``.

    It is the simulated network's ``ActionSink``: the core's actions are
    carried out by the ``on_*`` methods, as the MQTT coordinator does.
    """

    def __init__(self, config: SimConfig) -> None:
        self.config = cfg = config
        self.data = _dataset(cfg.dataset, cfg.seed)
        text = self.data.model_spec
        if cfg.model:
            n_classes = max(2, self.data.n_classes)
            shape = self.data.shape
            text = complete_model(cfg.model, self.data.n_features, n_classes, shape)
        self.spec = kernels.ModelSpec.parse(text)
        if self.spec.n_features != self.data.n_features:
            raise ValueError(
                f"model {self.spec} expects {self.spec.n_features} features, "
                f"dataset {cfg.dataset} has {self.data.n_features}"
            )
        check_fits(self.spec, self.data.shape, f"dataset {cfg.dataset}")
        self.scenario = make_scenario(cfg.scenario, cfg.n_workers, cfg.seed)
        links = {"rate": cfg.link_rate, "delay": cfg.link_delay, "loss": cfg.link_loss}
        profiles = {
            wid: (
                p
                if cfg.compute_time is None
                else dataclasses.replace(p, compute_time=cfg.compute_time)
            ).for_model(self.spec.macs, self.spec.n_params)
            for wid, p in with_links(self.scenario.profiles, **links).items()
        }
        self.policy = parse_policy(cfg.policy)
        self.compress = parse_compress(cfg.compress)
        self.params_code = params_codec.parse_code(cfg.compress_down)
        # --dp: the accountant, and the mechanism (each worker's q set below)
        self.privacy = make_ledger(cfg.dp, cfg.dp_delta, cfg.dp_epsilon_budget)
        self.dp = dp_mechanism(cfg.dp, cfg.dp_clip, cfg.dp_noise, seed=cfg.seed)
        self.server = ParameterServer(
            self.spec.init_params(cfg.seed),
            policy=self.policy,
            optimizer=cfg.optimizer,
            lr=cfg.lr,
            lr_workers=cfg.lr_workers,
            staleness_aware=bool(
                JOB.staleness_aware
                if cfg.staleness_aware is None
                else cfg.staleness_aware
            ),
            norm_guard=NormGuard(cfg.norm_guard) if cfg.norm_guard > 0 else None,
            liveness_timeout=cfg.liveness_timeout,
            balancer=(
                Balancer.for_policy(
                    self.policy, eager=cfg.balance_eager, base_batch=cfg.batch_size
                )
                if cfg.balance
                else None
            ),
            server_opt=cfg.server_opt,
            server_lr=cfg.server_lr,
            dp=self.dp,
            admission=Admission(on_first_push=cfg.admit_on_first_push),
        )
        self.power = board_power(cfg.board)
        shards = partition(self.data.y_train, cfg.n_workers, cfg.partition, cfg.seed)
        self.workers: dict[str, SimWorker] = {}
        self.stop_reason = "max_time"
        pairs = zip(shards, profiles.items(), strict=True)
        for index, (shard, (wid, profile)) in enumerate(pairs):
            X, y = self.data.shard(shard)
            batch = min(cfg.batch_size, profile.max_batch or cfg.batch_size)
            w = SimWorker(wid, profile, X, y, seed=cfg.seed, index=index, batch=batch)
            if self.dp is not None and len(y):  # the accountant's q = batch / shard
                self.dp.set_rate(wid, min(batch, len(y)) / len(y))
            if is_shaped(profile):
                n, spec = self.spec.n_params, str(self.spec)
                w.link = SimLink.build(
                    wid, profile, n, spec, w.link_rng, cfg.compress, cfg.compress_down
                )
            self.workers[wid] = w
        if self.dp is not None and self.privacy and self.privacy.spent(self.dp):
            raise ValueError(
                f"dp_epsilon_budget {cfg.dp_epsilon_budget:g} allows no update at "
                f"dp_noise {cfg.dp_noise:g}"
            )
        self.watch = DivergenceWatch(backoff=cfg.divergence_backoff)
        self._host_free = 0.0  # when the host's CPU is next free (see _host_in)
        self.loop = EventLoop()
        self.trace: list[tuple[float, float]] = []
        self.rejected: dict[str, int] = {}
        self.applied = 0
        self.applied_at: list[tuple[float, str]] = []  # (time, worker) per update
        self._release_no: dict[str, int] = dict.fromkeys(self.workers, 0)
        sizes = {
            wid: message_bytes(wid, self.spec.n_params, str(self.spec),
                               EMULATED_CHUNK, cfg.compress, cfg.compress_down)
            for wid in self.workers
        }  # fmt: skip
        self.meter = BoardMeter(
            {w: z["update"] for w, z in sizes.items()},
            {w: z["params"] for w, z in sizes.items()},
        )
        self._usage: tuple[float, float, float] | None = None  # at the target

    # -- links -------------------------------------------------------------
    def _send(self, w: SimWorker, handler: object, *args: object) -> None:
        """Deliver a QoS 1 message over ``w``'s link, retrying until acknowledged."""
        delay = w.profile.sample_link(w.link_rng)
        if delay is not None:
            self.loop.after(delay, handler, *args)  # type: ignore[arg-type]
            if w.profile.sample_link(w.link_rng) is not None:
                return  # acknowledged; a lost ack means the sender repeats it
        self.loop.after(self.config.retry_timeout, self._send, w, handler, *args)

    def _over(
        self, w: SimWorker, up: bool, kind: str, handler: object, *args: object
    ) -> None:
        """Send one ``kind`` of message over ``w``'s shaped link, else as ``_send``."""
        if w.link is None:
            self._send(w, handler, *args)
            return
        at = w.link.arrival("up" if up else "down", kind, self.loop.now)
        self.loop.at(at, handler, *args)  # type: ignore[arg-type]

    def _send_once(self, w: SimWorker, handler: object, *args: object) -> None:
        """Deliver a fire-and-forget message (heartbeats); it may be lost."""
        delay = w.profile.sample_link(w.link_rng)
        if delay is not None:
            self.loop.after(delay, handler, *args)  # type: ignore[arg-type]

    # -- the PS side: the ActionSink ----------------------------------------
    def on_release(self, action: Release) -> None:
        batches = action.batches or {}
        for wid, _answer in action.targets():
            w = self.workers.get(wid)
            if w is None:
                continue
            self._release_no[wid] += 1
            n = self._release_no[wid]
            batch = batches.get(wid, w.default_batch)
            self.meter.sent_down(wid, self.loop.now)
            args = (w, n, action.version, action.params, batch)
            self._over(w, False, "params", self._on_params, *args)

    def on_applied(self, action: Applied) -> None:
        self.applied += 1
        self.applied_at.append((self.loop.now, action.worker_id))
        if self.privacy is not None and self.dp and self.privacy.spent(self.dp):
            self.stop_reason = "privacy_budget"  # --dp-epsilon-budget: no more
            self.loop.stop()

    def on_rejected(self, action: Rejected) -> None:
        self.rejected[action.reason] = self.rejected.get(action.reason, 0) + 1

    def on_held(self, action: Held) -> None:
        """Nothing crosses the link for a held worker; the meter counts its hold."""
        self.meter.hold(action.worker_id, self.loop.now)

    def on_left(self, action: WorkerLeft) -> None:
        """The board finds out on its own (it crashed, or it said bye)."""

    def _ps(self, event: Event) -> None:
        carry_out(self.server.handle(event, self.loop.now), self)

    def _ps_join(self, w: SimWorker, incarnation: int) -> None:
        # release numbers keep growing across joins: a join delivered twice
        # (its acknowledgement lost) must not restart them below what the
        # board already took, or every later release looks like a redelivery
        self._ps(Join(w.worker_id, incarnation, max_batch=w.cap))

    def _ps_tick(self) -> None:
        self._ps(Tick())
        self.loop.after(self.config.tick_interval, self._ps_tick)

    def _evaluate(self) -> None:
        _, params = self.server.params_view()
        acc = float(
            kernels.accuracy(self.spec, params, self.data.X_test, self.data.y_test)
        )
        self.trace.append((round(self.loop.now, 6), acc))
        if self._usage is None and acc >= self.config.target_accuracy:
            self._usage = self._board_usage(self.loop.now)
            if self.config.stop_at_target:
                self.stop_reason = "target_accuracy"
                self.loop.stop()
        self.watch.steer(
            self.server.model,
            params,
            accuracy=acc,
            non_finite_total=self.rejected.get("non_finite", 0),
            applied_total=self.applied,
        )
        # multiples of the interval, so float steps do not drift past max_time
        self.loop.at(len(self.trace) * self.config.eval_interval, self._evaluate)

    # -- the board side ----------------------------------------------------
    def _on_params(
        self,
        w: SimWorker,
        release_no: int,
        version: int,
        params: np.ndarray,
        batch: int,
    ) -> None:
        if not w.alive or not w.waiting or release_no <= w.expected_release:
            return  # a redelivery, or a message for a board that is down
        w.expected_release = release_no
        w.waiting = False
        # a board never goes past its own memory limit, whatever it is told
        w.batch = min(batch, w.profile.max_batch or batch)
        # it computes the rows it draws: a shard smaller than the batch is
        # all of it, with balancing or without
        cfg = self.config
        steps, duration = plan_steps(
            w.profile, w.compute_rng, min(w.batch, len(w.y)), len(w.y),
            local_steps=cfg.local_steps, local_epochs=cfg.local_epochs,
            local_time=cfg.local_time, start=self.loop.now,
        )  # fmt: skip
        self.loop.after(
            duration, self._on_computed, w, w.epoch, version, params, duration, steps
        )

    def _on_computed(
        self,
        w: SimWorker,
        epoch: int,
        version: int,
        params: np.ndarray,
        duration: float,
        steps: int = 1,
    ) -> None:
        if epoch != w.epoch:
            return  # crashed meanwhile: the work is lost
        if self.params_code != F32:  # the board holds what its release decodes to
            params = params_codec.decoded(params, self.params_code)
        draw = functools.partial(w.next_batch, w.batch)
        loss, grad, samples = local_update(
            self.spec, params, draw, steps, self.config.lr
        )
        if self.dp is not None and self.dp.mode == "local":  # the board privatizes
            grad, _ = privatize(grad, self.dp.clip, self.dp.noise, w.dp_rng)
        if self.compress.code != F32:  # what the PS decodes, error feedback and all
            w.encoder = w.encoder or GradEncoder(grad.shape[0])
            c, arg = self.compress.code, self.compress.arg(grad.shape[0])
            grad = decode_update(
                c, bytes(w.encoder.encode(grad, c, arg)), grad.shape[0]
            )
        w.busy_time += duration
        w.clock += 1
        w.seq += 1
        w.waiting = True
        push = Push(
            worker_id=w.worker_id,
            clock=w.clock,
            seq=w.seq,
            base_version=version,
            update=grad,
            compute_time=duration,
            samples=samples,
            session=w.incarnation,
            loss=float(loss),
            steps=steps if steps > 1 else 0,
        )
        self.meter.sent_up(w.worker_id)
        self._over(w, True, "update", self._host_in, push)

    def _host_in(self, push: Push) -> None:
        """A push waits for the host's CPU: serve, broker (and an emulator) share it.

        The host is one queue served ``host_cores`` times as fast as one core,
        each update costing ``host_cpu_us + emulator_cpu_us`` of CPU.
        """
        cfg = self.config
        cost = (cfg.host_cpu_us + cfg.emulator_cpu_us) * 1e-6 / cfg.host_cores
        if cost <= 0:
            self._ps(push)
            return
        start = max(self.loop.now, self._host_free)
        self._host_free = start + cost
        self.loop.at(self._host_free, self._ps, push)

    def _heartbeat(self, w: SimWorker, epoch: int) -> None:
        if epoch != w.epoch:
            return
        beat = Heartbeat(w.worker_id, w.clock)
        if w.link is None:
            self._send_once(w, self._ps, beat)
        else:
            self._over(w, True, "heartbeat", self._ps, beat)
        self.loop.after(self.config.heartbeat_interval, self._heartbeat, w, epoch)

    def _start(self, w: SimWorker) -> None:
        w.alive, w.waiting = True, True
        w.epoch += 1
        w.expected_release = 0
        w.alive_since = self.loop.now
        self._over(w, True, "hello", self._ps_join, w, w.incarnation)
        self.loop.after(self.config.heartbeat_interval, self._heartbeat, w, w.epoch)

    def _crash(self, w: SimWorker) -> None:
        self.meter.end_hold(w.worker_id, self.loop.now)
        w.alive = False
        w.epoch += 1
        if w.alive_since is not None:
            w.alive_time += self.loop.now - w.alive_since
        w.alive_since = None

    def _rejoin(self, w: SimWorker) -> None:
        w.new_process()
        w.incarnation += 1
        w.clock = 0
        w.seq = 0
        self._start(w)

    # -- the run -----------------------------------------------------------
    def run(self) -> SimResult:
        cfg = self.config
        joins = cfg.join_times
        for i, w in enumerate(self.workers.values()):
            if i < len(joins) and joins[i] > 0:
                w.alive, w.alive_since = False, None  # not yet started
                self.loop.at(joins[i], self._start, w)
            else:
                self._start(w)
            if w.profile.crash_at is not None:
                self.loop.at(w.profile.crash_at, self._crash, w)
                if w.profile.rejoin_at is not None:
                    self.loop.at(w.profile.rejoin_at, self._rejoin, w)
        self.loop.after(cfg.tick_interval, self._ps_tick)
        self.loop.at(0.0, self._evaluate)
        self.loop.run_until(cfg.max_time)
        return self._result()

    def _board_usage(self, now: float) -> tuple[float, float, float]:
        """(bytes up, bytes down, joules) per board up to ``now``, means over boards."""
        ups, downs, joules = [], [], []
        cfg = self.config
        for wid, w in self.workers.items():
            since = w.alive_since
            t = BoardTime(
                alive=w.alive_time + (now - since if since is not None else 0.0),
                compute=w.busy_time,
                held=self.meter.held_until(wid, now),
                bytes_up=self.meter.up[wid],
                bytes_down=self.meter.down[wid],
            )
            rate = w.profile.link_rate if cfg.link_rate is None else cfg.link_rate
            ups.append(t.bytes_up)
            downs.append(t.bytes_down)
            joules.append(
                board_joules(
                    self.power, t, link_rate=rate, sleep_at_barrier=cfg.sleep_at_barrier
                )
            )
        return float(np.mean(ups)), float(np.mean(downs)), float(np.mean(joules))

    def _result(self) -> SimResult:
        cfg = self.config
        end = self.loop.now if self.stop_reason == "target_accuracy" else cfg.max_time
        idle = []
        for w in self.workers.values():
            alive = w.alive_time + (
                end - w.alive_since if w.alive_since is not None else 0
            )
            if alive > 0:
                idle.append(max(0.0, 1.0 - min(w.busy_time, alive) / alive))
        reached = [t for t, acc in self.trace if acc >= cfg.target_accuracy]
        _, params = self.server.params_snapshot()
        final = float(
            kernels.accuracy(self.spec, params, self.data.X_test, self.data.y_test)
        )
        up, down, joules = self._usage or self._board_usage(end)
        return SimResult(
            policy=cfg.policy,
            scenario=cfg.scenario,
            seed=cfg.seed,
            time_to_target=reached[0] if reached else None,
            final_accuracy=final,
            updates_per_s=self.applied / end if end > 0 else 0.0,
            idle_fraction=float(np.mean(idle)) if idle else 0.0,
            max_staleness=int(self.server.max_staleness_seen),
            applied=self.applied,
            rejected=dict(sorted(self.rejected.items())),
            trace=self.trace,
            events=self.loop.processed,
            state=self.watch.state,
            step_backoffs=self.watch.backoffs,
            link_bytes={
                wid: [w.link.up.stats.bytes, w.link.down.stats.bytes]
                for wid, w in self.workers.items()
                if w.link is not None
            },
            bytes_up_per_board=up,
            bytes_down_per_board=down,
            joules_per_board=joules,
            privacy=(
                self.privacy.report(self.dp)
                if self.privacy is not None and self.dp is not None
                else {}
            ),
            stop_reason=self.stop_reason,
        )


def simulate(config: SimConfig | None = None, **overrides: object) -> SimResult:
    """Run one simulation; keyword overrides patch the config's fields."""
    cfg = config or SimConfig()
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)  # type: ignore[arg-type]
    return Simulator(cfg).run()
