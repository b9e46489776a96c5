"""Windows of one-sample sensor reads (edgeps_worker.window) and the conv
board's small helpers: the model file's feature count, fetch's parameter count,
the config's stride."""

from __future__ import annotations

from array import array

import pytest
from edgeps.kernels import ModelSpec
from edgeps_worker import config, fetch, keep
from edgeps_worker.window import Windows, sensor_read


class Stream:
    """A sensor of 2 channels: sample t is (t, 100 + t) with label labels[t]."""

    def __init__(self, labels):
        self.labels = labels
        self.t = 0

    def read(self, xbuf):
        if self.t >= len(self.labels):
            return None
        xbuf[0], xbuf[1] = self.t, 100 + self.t
        self.t += 1
        return self.labels[self.t - 1]


def windows(w, n_features):
    out = []
    x = array("f", bytes(4 * n_features))
    while (label := w.read(x)) is not None:
        out.append((label, list(x)))
    return out


def test_a_window_per_stride_channel_first_oldest_sample_first():
    # Prepare: windows of 4 samples every 2
    w = Windows(Stream([0] * 9).read, 2, 4, 2)
    # Execute
    got = windows(w, 8)
    # Assert: after samples 0-3, 2-5, 4-7 (sample 8 alone is not a window's end)
    assert [g[1][:4] for g in got] == [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]
    assert got[0][1][4:] == [100, 101, 102, 103]
    assert all(g[0] == 0 for g in got)


def test_a_window_never_spans_a_change_of_label():
    # Prepare: label 1 from sample 3 on
    w = Windows(Stream([0, 0, 0, 1, 1, 1, 1, 1]).read, 2, 3, 1)
    # Execute
    got = windows(w, 6)
    # Assert: 0-2 is label 0; the next full window is 3-5, all label 1
    assert [(g[0], g[1][:3]) for g in got] == [
        (0, [0, 1, 2]),
        (1, [3, 4, 5]),
        (1, [4, 5, 6]),
        (1, [5, 6, 7]),
    ]


def test_only_a_conv1d_spec_gets_windows():
    read = Stream([0]).read
    assert sensor_read(read, "mlp:8-4-2", 0) is read
    w = sensor_read(read, "conv1d:2x4-c3k3-2", 0)
    assert w.__self__.n == 4 and w.__self__.stride == 4  # stride 0: the length


def test_model_file_and_fetch_sizes_of_a_conv_spec():
    text = "conv1d:3x64-c8k5p2-m4-c16k5p2-m4-6"
    spec = ModelSpec.parse(text)
    assert keep._features(text) == spec.n_features == 192
    assert fetch.n_params(text) == spec.n_params


@pytest.mark.parametrize(("stride", "ok"), [(16, True), (0, False), ("8", False)])
def test_config_stride(stride, ok):
    raw = {"job": "j", "worker_id": "w", "model": "conv1d:3x64-c8k5p2-m4-6",
           "broker_host": "127.0.0.1", "sensor": "accel", "stride": stride}  # fmt: skip
    if ok:
        assert config.validate(raw)["stride"] == stride
    else:
        with pytest.raises(ValueError, match="stride"):
            config.validate(raw)
