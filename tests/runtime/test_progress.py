"""Progress display: a refreshing block on a terminal, headline lines otherwise."""

from __future__ import annotations

import io
import json
import math

import numpy as np
from edgeps.core.registry import WorkerState
from edgeps.observe.metrics import Progress, _json_safe, dumps, status_lines
from hypothesis import given, settings
from hypothesis import strategies as st

RECORD = {
    "elapsed": 3.5,
    "version": 120,
    "accuracy": 0.8123,
    "updates_per_s": 40.0,
    "max_staleness": 4,
    "workers": {
        "w01": {"clock": 30, "staleness": 0, "state": "live", "class": "normal"},
        "w00": {"clock": 8, "staleness": 22, "state": "live", "class": "persistent"},
    },
}


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_lines_show_accuracy_rate_and_each_worker() -> None:
    lines = status_lines(RECORD)

    assert "acc 0.812" in lines[0] and "40.0 upd/s" in lines[0]
    assert lines[1].split()[0] == "w00" and "persistent" in lines[1]
    assert "staleness  22" in lines[1]


def test_pipe_gets_one_headline_per_interval() -> None:
    out = io.StringIO()
    progress = Progress(out, interval=2.0)

    progress.show(RECORD, 10.0)
    progress.show(RECORD, 11.0)  # too soon
    progress.show(RECORD, 12.5)

    assert out.getvalue().count("\n") == 2
    assert "\x1b[" not in out.getvalue()


def test_terminal_block_is_redrawn_in_place() -> None:
    term = FakeTerminal()
    progress = Progress(term, interval=0.0)

    progress.show(RECORD, 1.0)
    progress.show(RECORD, 2.0)

    assert term.getvalue().count("\x1b[3F") == 1  # moved up over the 3-line block


def test_json_lines_have_no_nan() -> None:
    text = dumps({"accuracy": math.nan, "loss": [1.0, math.inf]})

    assert text == '{"accuracy": null, "loss": [1.0, null]}'


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.integers(-100, 100).map(np.int64),
    st.floats(width=32, allow_nan=True).map(np.float32),
    st.sampled_from(list(WorkerState)),
)
_record = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=4), inner, max_size=4),
        st.dictionaries(st.integers(-5, 5), inner, max_size=3),
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _record, max_size=5))
def test_dumps_writes_what_the_json_safe_walk_writes(record: dict) -> None:
    text, walked = dumps(record), json.dumps(_json_safe(record), sort_keys=True)
    assert json.loads(text) == json.loads(walked)
    if not _int_keys(record):  # only str keys: the very same text
        assert text == walked


def _int_keys(value: object) -> list[int]:
    if isinstance(value, dict):
        keys = [k for k in value if isinstance(k, int)]
        return keys + [k for v in value.values() for k in _int_keys(v)]
    if isinstance(value, list | tuple):
        return [k for v in value for k in _int_keys(v)]
    return []
