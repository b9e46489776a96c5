"""Heartbeats during long steps: a board's step can outlast the host's liveness timeout.

An ESP32 at 240 MHz needs 1-3 s per MLP step, and the worker loop sends
HEARTBEATs only between steps. ``StepHeartbeat`` wraps a trainer: while its
``step()`` computes, a second thread (``_thread``) publishes a HEARTBEAT every
``period_ms``, which also services the MQTT keepalive. The link is never used
by both threads at once: the main thread does not touch it inside the step,
and takes the lock when the step ends, so a heartbeat in flight finishes
first. On a port without ``_thread`` nothing is sent during a step, and the
host's liveness timeout must exceed the longest step (firmware/README.md:
keepalive budget).
"""

from edgeps_worker import clock, wire

try:
    import _thread
except ImportError:  # a port built without threads
    _thread = None


def install(worker, period_ms):
    """Wrap ``worker.trainer`` in a StepHeartbeat and start its thread now.

    Now, before any step: a thread started mid-step fragments the heap.
    """
    beats = StepHeartbeat(worker.trainer, period_ms)
    beats.attach(worker)
    worker.trainer = beats
    beats.start()
    return beats


class StepHeartbeat:
    """A trainer whose ``step()`` keeps the worker's session alive.

    ``trainer`` is the trainer to wrap, ``period_ms`` the HEARTBEAT period
    during a step. ``attach(worker)`` once the Worker exists; ``close()`` at
    the end lets the helper thread go (within 50 ms).
    """

    def __init__(self, trainer, period_ms):
        self.trainer = trainer
        self.model = trainer.model
        self.n_params = trainer.n_params
        self.period_ms = period_ms
        self.worker = None
        self._lock = None if _thread is None else _thread.allocate_lock()
        self._since = None  # while computing: ticks_ms of the step start or last beat
        self._closed = self._running = False

    def attach(self, worker):
        """The Worker whose link and identity the heartbeats use."""
        self.worker = worker

    def params_buffer(self):
        return self.trainer.params_buffer()

    def step(self):
        """The wrapped trainer's step, with heartbeats every period_ms meanwhile."""
        lock = self._lock
        if lock is None or self.worker is None:
            return self.trainer.step()
        if not self._running:
            self.start()
        self._since = clock.ticks_ms()
        try:
            return self.trainer.step()
        finally:
            with lock:
                self._since = None

    def start(self):
        """Start the helper thread (else the first step does)."""
        if _thread is None or self._running:
            return
        try:
            _thread.stack_size(8192)  # an MQTT publish, nothing deep
        except (AttributeError, ValueError):
            pass
        self._closed = False
        _thread.start_new_thread(self._loop, ())
        self._running = True

    def close(self):
        self._closed = True

    def _loop(self):
        lock = self._lock
        while lock is not None and not self._closed:
            clock.sleep_ms(50)
            since = self._since
            if (
                since is None
                or clock.ticks_diff(clock.ticks_ms(), since) < self.period_ms
            ):
                continue
            with lock:
                w = self.worker
                if self._since is None or w is None or not w.t.connected:
                    continue
                if w.session is None:
                    continue
                try:
                    beat = wire.encode_heartbeat(
                        w.job, w.wid, w.session, w.clock, w.key
                    )
                    w.t.publish(w.up, beat, 1)
                    w.stats["heartbeats"] += 1
                except (OSError, MemoryError, RuntimeError):
                    # the client closed a dead link: the worker finds out
                    # after the step and reconnects as usual
                    pass
                self._since = clock.ticks_ms()
        self._running = False
