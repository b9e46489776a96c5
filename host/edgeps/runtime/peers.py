"""The runtime's one record per worker: how to reach it over MQTT.

``Peer`` holds the transport side of a worker: its up and down topics, the
largest message it accepts (announced in its HELLO), the model spelling it
announced that was found equal to ours, its own HMAC key (derived from the
master key) and the protocol's addressing: the session the PS issued, the
nonce of the link that holds it and the nonces of its earlier links (a HELLO
naming one of them is a replay). What the PS decides with (clock,
sequence numbers, liveness) is the core's ``WorkerRecord``. Ingest creates and
updates peers; the outbox reads them.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from edgeps_worker import wire

from edgeps.security.keys import derive_worker_key

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Peer:
    worker_id: str
    down_topic: str
    max_chunk: int  # bytes per PARAMS message; the job's default until HELLO
    model_ok: str | None = None  # announced model text already found to be ours
    key: bytes | None = None  # this worker's own HMAC key
    session: int = 0  # issued in the last WELCOME (0: none yet)
    nonce: int = 0  # link of the HELLO that opened ``session``
    hello_nonce: int = 0  # link of the last HELLO decoded (a refusal names it)
    old_nonces: deque[int] = field(default_factory=lambda: deque(maxlen=32))
    codec: int = wire.DTYPE_F32  # UPDATE code its WELCOME names
    codec_arg: int = 0  # TOPK: k entries per UPDATE

    def open_session(self, session: int, nonce: int) -> None:
        """The core took a HELLO: its session and link are now the current ones."""
        if nonce != self.nonce and self.nonce:
            self.old_nonces.append(self.nonce)
        self.session, self.nonce = session, nonce

    def end_link(self, nonce: int) -> None:
        """A BYE or last will named this link: a HELLO naming it is a replay."""
        if nonce == self.nonce:
            self.nonce = 0  # no HELLO reopens it: nothing keeps its session
        if nonce and nonce not in self.old_nonces:
            self.old_nonces.append(nonce)


class Peers:
    """Peers by worker id and by up topic.

    With ``master_key``, each peer's key is derived from it. At most
    ``max_peers`` are kept: past that (a flood of made-up worker ids),
    a peer is still returned but not remembered, and a warning is logged once.
    Of peers without a session (ids the core never took a HELLO from, such as
    HELLOs with a wrong key) at most ``max_unjoined`` are kept: a new one
    evicts the oldest.
    """

    def __init__(
        self,
        job: str,
        *,
        max_chunk: int = 4096,
        max_peers: int = 65536,
        max_unjoined: int = 4096,
        master_key: bytes | None = None,
    ):
        self.job = job
        self.master_key = master_key
        self.max_chunk = max_chunk
        self.max_peers = max_peers
        self._by_id: dict[str, Peer] = {}
        self._by_topic: dict[str, Peer] = {}
        self._warned = False
        self.max_unjoined = max_unjoined
        self._unjoined: dict[str, None] = {}  # oldest first; some joined since
        # max_chunk each kept peer announced in its HELLO, and their minimum
        self._announced: dict[str, int] = {}
        self._floor: int | None = None

    def __len__(self) -> int:
        return len(self._by_id)

    def forget(self, worker_id: str) -> None:
        """Drop the peer of an id the core forgot (it never pushed, or was evicted)."""
        self._unjoined.pop(worker_id, None)
        peer = self._by_id.pop(worker_id, None)
        if peer is not None:
            self._by_topic.pop(wire.topic_up(self.job, worker_id), None)
        if self._announced.pop(worker_id, None) is not None:
            self._floor = None

    def announce(self, peer: Peer, max_chunk: int) -> None:
        """The largest message ``peer`` reads, from its HELLO."""
        peer.max_chunk = max_chunk
        if peer.worker_id in self._by_id:
            self._announced[peer.worker_id] = max_chunk
            self._floor = None

    def shared_chunk(self) -> int:
        """The largest PARAMS message every worker that said HELLO reads.

        Every worker subscribes to the shared topic and receives each shared
        copy, also of a round it is not released in: a copy chunked for the
        round's workers alone would reach a board with a smaller receive
        buffer as messages it can only drain and drop.
        """
        if self._floor is None:
            self._floor = min(self._announced.values(), default=1 << 30)
        return self._floor

    def of_topic(self, topic: str) -> Peer | None:
        """The peer already seen on this up topic, if any."""
        return self._by_topic.get(topic)

    def get(self, worker_id: str, up_topic: str | None = None) -> Peer:
        """The peer of ``worker_id``, created (and kept, while there is room)."""
        peer = self._by_id.get(worker_id)
        if peer is None:
            peer = Peer(worker_id, wire.topic_down(self.job, worker_id), self.max_chunk)
            if self.master_key:
                peer.key = derive_worker_key(self.master_key, worker_id)
            if len(self._by_id) < self.max_peers:
                self._make_room_unjoined()
                self._by_id[worker_id] = peer
                self._unjoined[worker_id] = None
            elif not self._warned:
                self._warned = True
                log.warning("more than %d worker ids seen; not all are kept", len(self))
        if up_topic is not None and worker_id in self._by_id:
            self._by_topic[up_topic] = peer
        return peer

    def _make_room_unjoined(self) -> None:
        """Forget the oldest peers that still have no session, past the cap."""
        unjoined = self._unjoined
        while len(unjoined) >= self.max_unjoined:
            wid = next(iter(unjoined))
            del unjoined[wid]
            peer = self._by_id.get(wid)
            if peer is not None and not peer.session:
                self.forget(wid)
