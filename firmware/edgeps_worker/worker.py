"""The shared worker loop: join, pull parameters, push gradients, survive drops.

Runs unchanged on MicroPython (ESP32, unix port) and CPython; it follows
firmware/PROTOCOL.md and talks to the broker only through a *transport* and
computes only through a *trainer*, both duck-typed.

Transport (the firmware ``MQTTClient`` or a paho adapter)::

    t.connect(will_topic, will_payload)   # clean session, last will QoS1; OSError
    t.subscribe(topic, qos=1)
    t.publish(topic, payload, qos=1, retain=False)   # returns after PUBACK; OSError
    t.publish_frame(topic, n, write, *args)  # optional, QoS 1: write() frames in place
    t.poll(timeout_ms) -> (topic, payload) | None   # payload None: a message
                                          # too long for it, dropped (oversized)
    t.close()
    t.connected -> bool

Trainer (``edgeps_worker.trainer.KernelTrainer`` on boards; anything with the
same members on CPython, e.g. a numpy or C-kernel trainer)::

    trainer.n_params -> int          # length of the flat float32 parameter vector
    trainer.model -> str             # model spec text, e.g. "mlp:64-32-10"
    trainer.params_buffer()          # writable buffer of n_params float32, the
                                     # same object on every call; PARAMS chunks
                                     # are copied straight into it (array('f'),
                                     # or a C-contiguous numpy float32 array)
    trainer.step() -> (loss, samples, grad)
                                     # one gradient on the next local batch,
                                     # against the current contents of the
                                     # parameter buffer; grad is a bytes-like
                                     # of n_params little-endian float32 that
                                     # stays valid until the next step()
    trainer.codecs -> int            # optional: UPDATE codes it makes (bit
                                     # 1 << code; F32 only without it)
    trainer.encode_grad(code, arg)   # after step(): the UPDATE body in code
                                     # (ValueError on NaN/Inf: nothing sent)
    trainer.local_round(h, epochs, seconds, lr) -> (loss, samples, steps, delta)
                                     # optional: a job's local round (SGD steps
                                     # from the parameter buffer, the delta,
                                     # released minus trained, where encode_grad
                                     # finds it); a board's is local_round.run
    trainer.set_scale(data)          # optional: the job's scaler (WELCOME), f32
                                     # offsets then inverse stds, bytes; None:
                                     # raw; a board's is local_card.set_scale

``trainer.model`` and ``trainer.codecs`` are announced in HELLO; the worker
checks the WELCOME's n_params against ``trainer.n_params`` and its codec
against ``codecs``, and encodes each push in that codec; a WELCOME naming
local rounds makes each release a local round pushed as a delta (UPDATE
steps > 1), and one carrying a scaler goes to ``set_scale``. A trainer with
``moments()`` -> (rows, means, variances) sends them in HELLO. A trainer with
``max_batch`` (int) and ``set_batch(n)`` takes the batch size a release asks
for. Stop reasons of
``Worker.run()``: "done" (a STOP done for this session), "iterations"
(max_iterations pushes made), "stopped" (the stop callback said so),
"model_mismatch" (the job trains another model), "codec" (the job's UPDATE
code is not one the trainer makes), "duplicate_id" (another process holds
this worker id), "memory" (a MemoryError, fatal).
"""

from edgeps_worker import clock, unload, wire
from edgeps_worker.params_sink import ParamsSink

# counters exposed in Worker.stats, in this order
STAT_NAMES = ("pushes", "releases", "hellos", "heartbeats", "dropped_updates",
              "reconnects", "rejects", "bad_messages", "timeouts", "memory_errors",
              "bad_grads", "peak_mem")  # fmt: skip


class Worker:
    """One worker of one job: the protocol state machine around a trainer.

    Parameters
    ----------
    transport, trainer: see the module docstring.
    job, worker_id: ids, ``[A-Za-z0-9_-]{1,32}``.
    instance: names this process (random u64 by default); stays the same
        across reconnects, so a re-HELLO keeps the worker's place.
    max_iterations: stop after this many pushes (0: until MODEL says done).
    stop: callable returning True when the loop should end (checked often).
    heartbeat_ms: HEARTBEAT period while connected and joined.
    release_timeout_ms: re-HELLO when no release came for this long.
    backoff_min_ms, backoff_max_ms: reconnect delay doubles from min to max.
    max_chunk: largest message this worker sends or asks for.
    poll_ms: longest single wait in the transport, bounds stop-check latency.
    key: this worker's own HMAC key (bytes): tags every message, required on
        incoming ones.
    mem_probe: callable returning the bytes of heap in use, sampled around
        receiving, computing and sending; the peak lands in stats["peak_mem"].
    log: callable taking one string, or None to stay quiet.

    The link steps in ``worker_link`` share this state with the loop: ``sink``
    (the PARAMS sink), ``joined`` (HELLO sent on this link), ``waiting`` and
    ``wait_since`` (a release is due, since then), ``last_hb`` (the last
    HEARTBEAT, HELLO or UPDATE), ``unacked`` (head of the push awaiting its
    release), ``refused`` (HELLOs refused as duplicate_id), ``backoff_ms``
    (the last reconnect delay; 0 once a link came up), and ``note``,
    ``count_bad`` and ``should_stop``.
    """

    def __init__(
        self,
        transport,
        trainer,
        job,
        worker_id,
        instance=0,
        max_iterations=0,
        stop=None,
        heartbeat_ms=5000,
        release_timeout_ms=15000,
        backoff_min_ms=250,
        backoff_max_ms=16000,
        max_chunk=4096,
        poll_ms=200,
        key=None,
        mem_probe=None,
        log=None,
    ):
        if not wire.valid_id(job) or not wire.valid_id(worker_id):
            raise ValueError("job and worker ids must match [A-Za-z0-9_-]{1,32}")
        n = int(trainer.n_params)
        if n <= 0:
            raise ValueError("trainer.n_params must be positive")
        if max_iterations < 0 or heartbeat_ms <= 0 or release_timeout_ms <= 0:
            raise ValueError("max_iterations >= 0, timeouts > 0")
        if backoff_min_ms <= 0 or backoff_max_ms < backoff_min_ms:
            raise ValueError("need 0 < backoff_min_ms <= backoff_max_ms")
        if not 0 <= instance < 1 << 64:
            raise ValueError("instance must fit in 64 bits")
        if not 64 <= max_chunk <= 1 << 20 or poll_ms <= 0:
            raise ValueError("max_chunk must be in [64, 2**20] and poll_ms > 0")
        self.t = transport
        self.trainer = trainer
        self.job = job
        self.wid = worker_id
        self.instance = instance or clock.random_u64()
        self.max_iterations = max_iterations
        self._stop_cb = stop
        self.heartbeat_ms = heartbeat_ms
        self.release_timeout_ms = release_timeout_ms
        self.backoff_min_ms = backoff_min_ms
        self.backoff_max_ms = backoff_max_ms
        self.max_chunk = max_chunk
        self.poll_ms = poll_ms
        self.key = key
        self._mem_probe = mem_probe
        self._log = log
        self.n_params = n
        self.codec, self.codec_arg = 1, 0  # the UPDATE code and arg WELCOME names
        self.sink = ParamsSink(trainer.params_buffer(), n * 4, trainer)
        self.up = wire.topic_up(job, worker_id)
        self.down = wire.topic_down(job, worker_id)
        self.model_topic = wire.topic_model(job)
        self.stats = dict.fromkeys(STAT_NAMES, 0)
        self.reject_reasons = {}
        self.clock = 0  # iterations completed (pushed)
        self.seq = 0  # per session: the first push of a session is 1
        self.run_id = 0  # the serve run, adopted from WELCOME
        self.session = None  # issued by the PS in WELCOME
        self.nonce = 0  # names this connection (HELLOs and last will)
        self.refused = 0  # HELLOs refused as duplicate_id
        self.version = -1  # parameter version currently in the buffer
        self.last_loss = float("nan")
        self.model_state = None  # None until a MODEL message was read
        self.stop_reason = None
        # header of the last UPDATE until its release; the trainer's grad buffer
        # holds its body, so a send re-encodes instead of keeping the chunks
        self.unacked = None
        self._grad = None
        self.joined = False  # HELLO sent on this link
        self.waiting = False  # joined and waiting for PARAMS
        self.wait_since = 0
        self.last_hb = 0
        self.backoff_ms = 0  # the last reconnect delay; 0 once a link came up

    # -- public ---------------------------------------------------------

    def run(self):
        """Run until done, max_iterations, the stop callback or a model mismatch."""
        while self.stop_reason is None:
            if self.should_stop():
                self.stop_reason = "stopped"
                break
            try:
                self._session()
            except MemoryError as exc:
                # a rejoin would fail the same way: stop instead of looping
                self.stats["memory_errors"] += 1
                self.stop_reason = "memory"
                self.note("out of memory: " + repr(exc))
                break
            except OSError as exc:
                self.note("link lost: " + repr(exc))
                self._rare("close")  # worker_link.close
                if self.stop_reason is not None or self.should_stop():
                    break
                self.stats["reconnects"] += 1
                self._rare("backoff")  # worker_link.backoff
        if self.stop_reason is None:
            self.stop_reason = "stopped"
        self.leave()
        return self.stop_reason

    # -- one connection -------------------------------------------------

    def _session(self):
        """Connect, join and work until a stop reason is set or the link fails."""
        self.start_link()
        while self.stop_reason is None:
            if self.should_stop():
                self.stop_reason = "stopped"
                return
            self.run_timers()
            budget = self.poll_ms
            if self.joined:  # wake up for the next heartbeat
                left = self.heartbeat_ms - clock.ticks_diff(
                    clock.ticks_ms(), self.last_hb
                )
                budget = max(1, min(budget, left))
            msg = self.t.poll(budget)
            if msg is not None:
                self.feed(msg[0], msg[1])

    def start_link(self):
        """Step API (run() is built on it): connect, subscribe, new session."""
        if getattr(self.t, "payload_views", None) is True:
            self.t.payload_views = self.early  # the board's client
        self._rare("start_link")  # worker_link.start_link

    def early(self, topic, payload):
        """A message read while the client waits for an ack (the job's final
        release comes while the last UPDATE waits for its PUBACK): True when
        it was a chunk of this worker's own F32 release, written into the
        buffer now instead of queued as a copy. The chunk that completes a
        release is left to the queue, so the release is used in order."""
        if topic != self.down:
            return False
        try:
            m = wire.decode(payload, self.key)
        except wire.WireError:
            return False
        s = self.sink
        n = m.chunk_count
        own = (wire.PARAMS, 1, self.wid, self.job, len(s.view))
        if (m.type, m.dtype, m.wid, m.job, m.total_len) != own or not self._ours(m):
            return False
        if (m.version, m.seq, n) == (s.version, s.seq, s.count):
            n = s.left
        return n > 1 and s.add(m) is None

    def run_timers(self):
        """Join once MODEL says running; heartbeat and release timeout when due."""
        joined = self.joined or self.model_state == "running"
        if self.stop_reason is not None or not joined:
            return
        if not self.joined:
            # worker_link.hello; a rejoin need not await the retained MODEL again
            self._rare("hello")
            self.joined = True
        now = clock.ticks_ms()
        if clock.ticks_diff(now, self.last_hb) >= self.heartbeat_ms:
            if self.session is not None:
                beat = wire.encode_heartbeat(
                    self.job, self.wid, self.session, self.clock, self.key
                )
                self.t.publish(self.up, beat, 1)
                self.stats["heartbeats"] += 1
            self.last_hb = now
        if (
            self.waiting
            and clock.ticks_diff(now, self.wait_since) >= self.release_timeout_ms
        ):
            self.stats["timeouts"] += 1
            self.note("no release, re-HELLO")
            self._rare("hello")  # worker_link.hello

    # -- incoming -------------------------------------------------------

    def _dispatch(self, topic, payload):
        self._sample()
        if payload is None:  # oversized: the transport dropped it, the link stays
            self._rare("oversized", topic)  # worker_link.oversized
        elif self._handle(payload):
            self._release()  # out of _handle: its message is garbage during the step

    def _handle(self, payload):  # True when the message completed a release
        try:
            msg = wire.decode(payload, self.key)
        except wire.WireError as exc:
            self.count_bad("wire:" + str(exc.reason))
            return
        kind = msg.type
        if msg.job != self.job:
            self.count_bad("job")
        elif kind == wire.MODEL:
            # informational (unsigned): a new run of the job means a new HELLO
            known = self.model_state is not None and self.run_id
            self.model_state = msg.state
            if msg.state == "running" and known and msg.run != self.run_id:
                self._rare("hello")  # worker_link.hello
        elif kind == wire.PARAMS and not msg.wid:
            if msg.run == self.run_id:
                return self._on_params(msg)  # a release round's shared copy
        elif msg.wid != self.wid:
            self.count_bad("wid")
        elif kind == wire.WELCOME:
            self._rare("on_welcome", msg)  # worker_link.on_welcome
        elif kind == wire.STOP and (msg.session == self.nonce or self._ours(msg)):
            self._rare("on_stop", str(msg.reason))  # worker_link.on_stop
        elif kind == wire.STOP or not self._ours(msg):
            self.count_bad("session")
        elif kind == wire.PARAMS or kind == 10:  # 10: RELEASE
            return self._on_params(msg)
        elif kind == wire.REJECT:
            self._rare("on_reject", msg)  # worker_link.on_reject
        else:
            self.count_bad("type")

    def _ours(self, msg):
        """True if ``msg`` is addressed to this run and session."""
        s = self.session
        return s is not None and msg.run == self.run_id and msg.session == s

    def _on_params(self, msg):
        """A PARAMS chunk (own or shared) or a RELEASE; True once a release is whole."""
        asked = self.sink.done is None  # no release used since the last HELLO
        done = self.sink.add(msg)
        if done is True:
            self._sample()
            self.version, seq, batch = self.sink.done  # pyright: ignore[reportGeneralTypeIssues]
            if not seq and self.model_state == "done":
                # the job's final release (after MODEL done, answering no
                # push): the model to keep at its STOP, not one more step
                return
            if batch and hasattr(self.trainer, "set_batch"):
                self.trainer.set_batch(batch)
            return True
        elif done is not None:
            self.count_bad(done)
            if done[0] == "r" and not asked:  # release_*: its copy is gone or wrong
                # worker_link.hello: the PS resends the release whole; once
                # asked, more forged copies ask nothing until a release is used
                self._rare("hello")

    def _release(self):
        """Parameters are complete: compute one gradient and push it."""
        self.stats["releases"] += 1
        self.unacked = None
        self.waiting = False
        self._sample()
        t0 = clock.ticks_ms()
        steps = 1
        # ``local``: set by a WELCOME that asks for local rounds (worker_link),
        # so a board whose job has none keeps a smaller instance
        local = getattr(self, "local", None)
        if local is None:
            loss, samples, grad = self.trainer.step()
        else:
            from edgeps_worker import local_round

            loss, samples, steps, grad = local_round.round(self.trainer, local)
        if self.codec != 1:
            try:
                grad = self.trainer.encode_grad(self.codec, self.codec_arg)
            except ValueError:  # NaN/Inf: not pushed; a re-HELLO asks a release
                self.stats["bad_grads"] += 1
                self._rare("hello")  # worker_link.hello
                return
        compute_time = clock.ticks_diff(clock.ticks_ms(), t0) / 1000
        self.clock += 1
        self.seq += 1
        self.last_loss = loss
        self.unacked = (self.seq, self.clock, self.version, compute_time, samples,
                        steps)  # fmt: skip
        self._grad = grad
        # the UPDATE tells the PS the worker lives: no HEARTBEAT due until
        # heartbeat_ms after it
        self.waiting = True
        self.wait_since = self.last_hb = clock.ticks_ms()
        self._send_update()

    def _send_update(self):
        """Encode and publish the last UPDATE one chunk at a time."""
        head = self.unacked
        if head is None:
            return
        seq, clk, base, compute_time, samples, steps = head
        plan = wire.update_plan(self.job, self.wid, self.session, seq, clk, base,
                                compute_time, samples, self.last_loss, self._grad,
                                self.codec, self.max_chunk, self.key,
                                steps)  # fmt: skip
        # framed straight into the send buffer where it can: no chunk object
        frame = getattr(self.t, "publish_frame", None)
        for i in range(plan[0]):
            self._sample()
            if frame is None:
                self.t.publish(self.up, wire.chunk_frame(None, 0, plan, i), 1)
            else:
                frame(self.up, wire.chunk_len(plan, i), wire.chunk_frame, plan, i)
        self.stats["pushes"] += 1
        if self.max_iterations and clk >= self.max_iterations:
            self.stop_reason = "iterations"

    # -- helpers --------------------------------------------------------

    def _sample(self):
        if self._mem_probe is not None:
            used = self._mem_probe()
            if used > self.stats["peak_mem"]:
                self.stats["peak_mem"] = used

    def should_stop(self):
        """True when the stop callback says so."""
        return self._stop_cb is not None and bool(self._stop_cb())

    def leave(self):
        """Step API: say BYE when a link is up (a dead link leaves it to the
        last will), then close it."""
        self._rare("leave")  # worker_link.leave

    feed = _dispatch  # step API: handle one received message

    def _rare(self, name, *args):
        # what a worker runs now and then (joining, a STOP or REJECT, backing
        # off, leaving) is in worker_link, which a board unloads after each
        # use; each call site names the function it calls (worker_link.<name>)
        from edgeps_worker import worker_link

        try:
            return getattr(worker_link, name)(self, *args)
        finally:
            unload("worker_link")

    def count_bad(self, reason):
        """Count and log a message dropped for ``reason``."""
        self.stats["bad_messages"] += 1
        self.note("dropped message: " + reason)

    def note(self, text):
        """Log ``text`` with this worker's id, unless quiet."""
        if self._log is not None:
            self._log(self.wid + ": " + text)
