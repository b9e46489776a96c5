"""Ingest under `serve --compress`: the HELLO's codecs are checked, UPDATE bodies
are decoded to float32, and bad bodies are counted rejections of their worker."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from edgeps.codecs import F32, I8, TOPK, Compress, GradEncoder
from edgeps.core.types import Join, Push, Rejected
from edgeps.runtime.ingest import Ingest
from edgeps_worker import wire_host as wire

JOB = "j1"
N = 300
UP = wire.topic_up(JOB, "w1")


def joined(compress: Compress) -> Ingest:
    """An Ingest whose w1 said HELLO (all codes) and holds session 3."""
    ingest = Ingest(job=JOB, n_params=N, compress=compress)
    hello = wire.encode_hello(JOB, "w1", 9, 77, codecs=0b11110)
    join = ingest.feed(UP, hello, 0.0)
    assert isinstance(join, Join)
    ingest.peers.get("w1").open_session(3, 77)
    return ingest


def update(body: bytes, code: int, seq: int = 1, max_chunk: int = 4096) -> list:
    return wire.encode_update(JOB, "w1", 3, seq, seq, 0, 0.01, 16, 0.7, body,
                              dtype=code, max_chunk=max_chunk)  # fmt: skip


def feed_all(ingest: Ingest, chunks: list) -> object:
    out = None
    for c in chunks:
        out = ingest.feed(UP, c, 1.0) or out
    return out


def test_hello_without_the_jobs_codec_is_refused() -> None:
    # Prepare
    ingest = Ingest(job=JOB, n_params=N, compress=Compress(I8))

    # Execute: an F32-only HELLO (the encoder's default), then one that has I8
    refused = ingest.feed(UP, wire.encode_hello(JOB, "w1", 9, 77), 0.0)
    taken = ingest.feed(UP, wire.encode_hello(JOB, "w1", 9, 78, codecs=(1, 3)), 0.0)

    # Assert
    assert refused == Rejected("w1", 0, "codec_mismatch")
    assert isinstance(taken, Join)
    assert (ingest.peers.get("w1").codec, ingest.peers.get("w1").codec_arg) == (I8, 0)
    assert ingest.dropped["codec_mismatch"] == 1


def test_topk_job_names_k_for_the_welcome() -> None:
    ingest = joined(Compress(TOPK, 0.01))
    assert (ingest.peers.get("w1").codec, ingest.peers.get("w1").codec_arg) == (TOPK, 3)


@pytest.mark.parametrize(
    ("compress", "arg", "max_chunk"),
    [(Compress(I8), 0, 200), (Compress(TOPK, 0.05), 15, 150)],
)
def test_chunked_compressed_update_becomes_one_f32_push(
    compress: Compress, arg: int, max_chunk: int
) -> None:
    # Prepare
    ingest = joined(compress)
    g = np.random.default_rng(0).normal(0, 1, N).astype(np.float32)
    enc = GradEncoder(N)
    body = bytes(enc.encode(g, compress.code, arg))
    chunks = update(body, compress.code, max_chunk=max_chunk)
    assert len(chunks) > 1

    # Execute
    push = feed_all(ingest, chunks)

    # Assert: the decoded vector is what was sent (g minus what is still owed)
    assert isinstance(push, Push) and push.update.dtype == np.float32
    np.testing.assert_allclose(push.update, g - enc.residual, atol=1e-6)
    assert ingest.dropped == {}


def test_update_in_another_code_than_welcomed_is_rejected() -> None:
    # Prepare: the job is int8; w1 sends f32
    ingest = joined(Compress(I8))
    body = np.zeros(N, "<f4").tobytes()

    # Execute
    out = feed_all(ingest, update(body, F32, seq=4))

    # Assert
    assert out == Rejected("w1", 4, "codec")
    assert ingest.dropped["codec"] == 1


@pytest.mark.parametrize(
    ("compress", "body", "reason"),
    [
        (Compress(I8), bytes(4 * 3 + N - 1), "bad_length"),
        (Compress(TOPK, 0.01), struct.pack("<If", N, 1.0), "bad_index"),
        (Compress(TOPK, 0.01), struct.pack("<IfIf", 7, 1.0, 7, 1.0), "bad_index"),
    ],
)
def test_bad_bodies_are_rejections_of_their_worker(
    compress: Compress, body: bytes, reason: str
) -> None:
    # Prepare
    ingest = joined(compress)

    # Execute
    out = feed_all(ingest, update(body, compress.code, seq=2))

    # Assert: counted and refused; nothing reaches the core
    assert out == Rejected("w1", 2, reason)
    assert ingest.dropped[reason] == 1


def test_a_nan_scale_reaches_the_core_as_non_finite() -> None:
    # Prepare: a well-formed I8 body whose first scale is NaN
    ingest = joined(Compress(I8))
    body = bytearray(bytes(GradEncoder(N).encode(np.ones(N, np.float32), I8)))
    body[0:4] = struct.pack("<f", float("nan"))

    # Execute
    push = feed_all(ingest, update(bytes(body), I8))

    # Assert: the core's finite check refuses it (non_finite, with a resync)
    assert isinstance(push, Push) and not np.all(np.isfinite(push.update))


def test_topk_of_all_entries_fits_the_reassembler() -> None:
    # Prepare: topk:1 sends 8 bytes per entry, twice an f32 body
    ingest = joined(Compress(TOPK, 1.0))
    g = np.arange(N, dtype=np.float32) + 1
    body = bytes(GradEncoder(N).encode(g, TOPK, N))

    # Execute
    push = feed_all(ingest, update(body, TOPK, max_chunk=1024))

    # Assert
    assert isinstance(push, Push)
    np.testing.assert_array_equal(push.update, g)


def test_an_update_without_a_session_is_left_to_the_core() -> None:
    # Prepare: a worker this run never welcomed (the PS restarted) pushes int8
    ingest = Ingest(job=JOB, n_params=N, compress=Compress(I8))
    body = bytes(GradEncoder(N).encode(np.ones(N, np.float32), I8))

    # Execute
    out = feed_all(ingest, update(body, I8, seq=9))

    # Assert: decoded; the core answers it (unknown_worker sends it to HELLO)
    assert isinstance(out, Push) and out.seq == 9
    assert ingest.dropped == {}
