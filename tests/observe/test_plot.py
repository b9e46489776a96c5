"""`edgeps plot` on a real run's metrics file; `edgeps simulate --plot`."""

from __future__ import annotations

import dataclasses
import json
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from edgeps import cli
from edgeps.emulate.emulation import Emulation
from edgeps.observe.plot import TITLES, compare_figure, run_figure
from edgeps.observe.runs import load_runs, share, timeline
from edgeps.sim.compare import compare
from edgeps.sim.types import SimConfig

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (which must come first)."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


def svg_root(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


@pytest.fixture(scope="module")
def metrics_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Metrics of a short real run: edgeps serve + 4 emulated sensors, 1 straggler."""
    from tests.conftest import start_mosquitto

    tmp = tmp_path_factory.mktemp("plotrun")
    broker = start_mosquitto(tmp)
    path = tmp / "run.jsonl"
    emu = None
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edgeps",
                "serve",
                "--quiet",
                "--broker",
                broker.url,
                "--job",
                "plotrun",
                "--max-time",
                "6",
                "--metrics-interval",
                "0.3",
                "--metrics-out",
                str(path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        emu = Emulation(
            broker.url, "plotrun", n_workers=4, scenario="stragglers", duration=30.0
        ).start()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if emu is not None:
            emu.stop()
            emu.join(20)
        broker.stop()
    return path


@pytest.mark.integration
def test_run_figure_has_the_four_views(metrics_file: Path) -> None:
    # Prepare
    runs = load_runs([str(metrics_file)])

    # Execute
    fig = run_figure(runs)

    # Assert: accuracy and rate against time, staleness, one timeline row per worker
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:3] == [TITLES["accuracy"], TITLES["rate"], TITLES["staleness"]]
    assert titles[3].startswith(TITLES["timeline"])
    acc, rate, stale, tl_ax = fig.axes
    (line,) = acc.get_lines()
    assert line.get_label() == runs[0].label and runs[0].label.startswith("dsp")
    assert max(line.get_ydata()) > 0.5  # it trained
    assert len(rate.get_lines()) == 1 and len(stale.patches) > 0
    assert [t.get_text() for t in tl_ax.get_yticklabels()] == [
        "w00",
        "w01",
        "w02",
        "w03",
    ]
    tl = timeline(runs[0].records)
    assert sum(share(tl, "w00")[k] for k in ("computing", "communicating")) > 0.2


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_command_writes_a_valid_file(
    metrics_file: Path, tmp_path: Path, suffix: str, capsys: Any
) -> None:
    out = tmp_path / f"run{suffix}"

    code = cli.main(["plot", str(metrics_file), str(metrics_file), "-o", str(out)])

    assert code == 0, capsys.readouterr().err
    if suffix == ".png":
        width, height = png_size(out)
        assert width > 800 and height > 800
    else:
        # matplotlib names each axes' group: 3 shared views + 2 timelines
        groups = [
            g.get("id") for g in svg_root(out).iter("{http://www.w3.org/2000/svg}g")
        ]
        assert sorted(g for g in groups if g and g.startswith("axes_")) == [
            f"axes_{i}" for i in range(1, 6)
        ]


def test_simulate_compare_plot(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "cmp.svg"

    code = cli.main(
        [
            "simulate",
            "--compare",
            "bsp,dsp",
            "--seeds",
            "1",
            "--max-time",
            "4",
            "--plot",
            str(out),
        ]
    )

    assert code == 0, capsys.readouterr().err
    svg_root(out)


def test_compare_figure_axes() -> None:
    cfg = SimConfig(max_time=4.0)
    summaries = compare(["bsp", "asp"], dataclasses.replace(cfg), 1)

    fig = compare_figure(summaries, max_time=cfg.max_time)

    acc, t_target, rate, idle = fig.axes
    assert [ln.get_label() for ln in acc.get_lines()] == ["bsp", "asp"]
    assert [t.get_text() for t in rate.get_xticklabels()] == ["bsp", "asp"]
    heights = [p.get_height() for p in rate.patches]
    assert heights == pytest.approx([s.updates_per_s for s in summaries])
    assert len(t_target.patches) == 2 and len(idle.patches) == 2


def test_without_matplotlib_the_message_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # Prepare: a metrics file, and matplotlib hidden from imports
    path = tmp_path / "run.jsonl"
    path.write_text('{"elapsed": 1.0, "workers": {}}\n')
    monkeypatch.setitem(sys.modules, "matplotlib", None)

    # Execute
    code = cli.main(["plot", str(path), "-o", str(tmp_path / "x.png")])
    sim = cli.main(["simulate", "--compare", "bsp", "--plot", str(tmp_path / "y.png")])

    # Assert
    err = capsys.readouterr().err
    assert code == 2 and sim == 2
    assert err.count("pip install 'edgeps[plot]'") == 2
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("name", ["run.gif", "nodir/run.png"])
def test_bad_output_paths(tmp_path: Path, name: str, capsys: Any) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"elapsed": 1.0, "workers": {}}\n')

    assert cli.main(["plot", str(path), "-o", str(tmp_path / name)]) == 2
    assert "-o" in capsys.readouterr().err


def test_two_runs_appended_to_one_file_are_two_lines(tmp_path: Path) -> None:
    # Prepare: the same --metrics-out file written by two runs in turn
    path = tmp_path / "m.jsonl"
    lines = []
    for _ in range(2):
        for i in range(4):
            rec = {"elapsed": 1.0 + i, "policy": "dsp", "accuracy": 0.2 * i,
                   "workers": {"w0": {"accepted": i, "state": "live"}}}  # fmt: skip
            lines.append(json.dumps(rec) + "\n")
    path.write_text("".join(lines))
    # Execute
    fig = run_figure(load_runs([str(path)]))
    # Assert: two accuracy lines, each going forward in time
    acc = fig.axes[0]
    got = acc.get_lines()
    assert [ln.get_label() for ln in got] == [
        "dsp (run 1 of m.jsonl)", "dsp (run 2 of m.jsonl)"
    ]  # fmt: skip
    for ln in got:
        xs = list(ln.get_xdata())
        assert xs == sorted(xs) and len(xs) == 4
