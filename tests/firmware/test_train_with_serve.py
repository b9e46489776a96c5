"""End to end: one MicroPython board worker trains the digits MLP with `edgeps serve`
until the host's target accuracy, then stops on the STOP "done" addressed to it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from edgeps.workloads.datasets import load_dataset, partition_iid
from edgeps_worker import datafile

from tests.conftest import FIRMWARE
from tests.helpers.fw_host import PushWatch, Started, write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
MPY_ENV = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")


def write_board_data(directory, shard: int) -> None:
    """The board's data file: shard ``shard`` of 4 of the host's digits split."""
    ds = load_dataset("digits", seed=0)
    X, y = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[shard])
    datafile.write_file(str(directory / "data.bin"), X.tolist(), y.tolist())


def start_serve(
    port: int, job: str, policy: str, target: str, *extra: str
) -> subprocess.Popen:
    """`edgeps serve` on the digits MLP, printing its JSON summary at the end."""
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker",
         f"mqtt://127.0.0.1:{port}", "--job", job, "--dataset", "digits",
         "--model", "mlp:64-32-10", "--policy", policy, "--target-accuracy",
         target, "--max-time", "120", "--quiet", "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def run_board_with_serve(
    micropython: str, cfg, tmp_path, serve: subprocess.Popen, stop_serve: bool = False
) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the board's main.py on ``cfg`` to its end, then take serve's JSON
    summary (serve is killed if it is still running); (board run, summary).

    With ``stop_serve``, serve is asked to finish (SIGTERM) once the board has
    ended, rather than waited for to its own end."""
    try:
        board = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=180, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        if stop_serve and serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)
    lines = out.strip().splitlines()
    assert lines, f"serve printed no summary: {err}"
    summary = json.loads(lines[-1])
    summary["_stderr"] = err
    return board, summary


def start_board_and_cpython_workers(
    micropython: str, cfg, tmp_path, port: int, job: str, timeout: float = 90
) -> tuple[Started, list[Started]]:
    """The board (main.py on ``cfg``, verbose) and two `edgeps worker` processes
    (py-1, py-2 on digits shards 1 and 2 of 4), each waited for until it is
    ready: the board subscribed, the CPython workers done loading (numpy, their
    data) and about to subscribe.

    Start serve after this: its retained MODEL then reaches every worker at
    once. Started after serve, a worker that is slow to start on a loaded box
    finds the job done (the CPython workers alone reach the target in about
    a second) and the board waits for the job's next run until it is killed.
    """
    board = start_board(micropython, cfg, tmp_path, timeout)
    try:
        return board, start_cpython_workers(port, job, timeout)
    except BaseException:
        board.kill()
        raise


def start_board(micropython: str, cfg, tmp_path, timeout: float = 90) -> Started:
    """The board (main.py on ``cfg``, verbose), waited for until it is subscribed."""
    board = Started([micropython, str(FIRMWARE / "main.py"), str(cfg)], env=MPY_ENV,
                    cwd=tmp_path)  # fmt: skip
    if not board.wait_for("mpy-1: connected", timeout):
        board.kill()
        raise AssertionError(f"not ready in {timeout} s:\n{board.output}")
    return board


def start_cpython_workers(port: int, job: str, timeout: float = 90) -> list[Started]:
    """py-1 and py-2 (`edgeps worker` on digits shards 1 and 2 of 4), waited for
    until they are done loading (numpy, their data) and about to subscribe."""
    worker = [sys.executable, "-m", "edgeps", "worker", "--broker",
              f"mqtt://127.0.0.1:{port}", "--job", job, "--batch", "16",
              "--log-level", "info"]  # fmt: skip
    cpython = [
        Started([*worker, "--id", f"py-{i}", "--emulated", f"digits:{i}/4"])
        for i in (1, 2)
    ]
    for proc in cpython:
        if not proc.wait_for("local samples", timeout):
            for p in cpython:
                p.kill()
            raise AssertionError(f"not ready in {timeout} s:\n{proc.output}")
    return cpython


def run_mixed_job(
    micropython: str, mosquitto, tmp_path, job: str, *serve_args: str,
    board_first: bool = False,
) -> tuple[int, str, dict, str]:  # fmt: skip
    """The board (digits shard 0 of 4) and two CPython workers (shards 1, 2),
    all ready, then `edgeps serve` on the digits MLP with ``serve_args`` to a
    target of 0.9 within 150 s: (board's exit code, its output, serve's JSON
    summary, serve's stderr). Every process is killed at the end.

    ``board_first``: the CPython workers, ready, are paused (SIGSTOP) until
    the board has pushed once, as Pis that come online after the board. A
    synchronous policy (fedavg, bsp) waits only for workers that have pushed
    (serve admits a newcomer on its first push), and two CPython workers
    reach the target in half a second, before a board's first round of local
    steps is done: started together, the board is in none of the rounds.
    """
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job=job, model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=True,
    )  # fmt: skip
    board, cpython = start_board_and_cpython_workers(
        micropython, cfg, tmp_path, mosquitto.port, job
    )
    watch = None
    serve = None
    try:
        if board_first:
            for p in cpython:
                os.kill(p.proc.pid, signal.SIGSTOP)
            watch = PushWatch(mosquitto.port, job, "mpy-1")
        serve = subprocess.Popen(
            [sys.executable, "-m", "edgeps", "serve", "--broker",
             f"mqtt://127.0.0.1:{mosquitto.port}", "--job", job, "--dataset",
             "digits", "--model", "mlp:64-32-10", *serve_args,
             "--target-accuracy", "0.9", "--max-time", "150", "--quiet", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        if watch is not None:
            pushed = watch.pushed.wait(90)
            for p in cpython:
                os.kill(p.proc.pid, signal.SIGCONT)
            assert pushed, f"the board never pushed:\n{board.output}"
        code, text = board.finish(timeout=200)
        out, err = serve.communicate(timeout=60)
    finally:
        if watch is not None:
            watch.close()
        for p in [board, *cpython]:
            p.kill()
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)
    return code, text, json.loads(out.strip().splitlines()[-1]), err


def board_stats(output: str) -> dict:
    """The stats the board printed with ``stopped: done``."""
    return json.loads(output.split("stopped: done ", 1)[1].splitlines()[0])


def test_board_worker_reaches_the_target_accuracy(micropython, mosquitto, tmp_path):
    # Prepare: worker 0 of 4 holds a quarter of the host's training split
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="digits", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=False,
    )  # fmt: skip
    serve = start_serve(mosquitto.port, "digits", "asp", "0.85")
    # Execute
    worker, summary = run_board_with_serve(micropython, cfg, tmp_path, serve)
    err = summary["_stderr"]
    # Assert
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "stopped: done" in worker.stdout
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.85
    assert summary["workers"]["mpy-1"]["rejected"] == 0


def test_board_with_its_own_key_joins_trains_and_stops_under_v2(
    micropython, mosquitto, tmp_path
):
    # Prepare: `edgeps keys new` on the host, `edgeps keys derive` for the board
    keys = [sys.executable, "-m", "edgeps", "keys"]
    master, own = tmp_path / "master.key", tmp_path / "mpy-1.key"
    subprocess.run([*keys, "new", "--out", str(master)], check=True, timeout=60)
    subprocess.run([*keys, "derive", "--master", str(master), "--worker", "mpy-1",
                    "--out", str(own)], check=True, timeout=60)  # fmt: skip
    board_key = own.read_text().split()[-1]  # the hex line of the key file
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="keyed", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=False, hmac_key=board_key,
    )  # fmt: skip
    serve = start_serve(
        mosquitto.port, "keyed", "asp", "0.8", "--hmac-key-file", str(master)
    )
    # Execute
    worker, summary = run_board_with_serve(micropython, cfg, tmp_path, serve)
    err = summary["_stderr"]
    # Assert: joined (WELCOME), trained, stopped on the STOP signed for it
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "stopped: done" in worker.stdout
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["workers"]["mpy-1"]["accepted"] > 0
    assert summary["workers"]["mpy-1"]["rejected"] == 0
    assert summary["dropped"].get("hmac", 0) == 0


def test_two_board_workers_in_lockstep_under_bsp(micropython, mosquitto, tmp_path):
    # Prepare: two boards, each with its own quarter of the training split
    configs = []
    for i in range(2):
        d = tmp_path / f"w{i}"
        d.mkdir()
        write_board_data(d, i)
        configs.append(
            write_worker_config(
                d, mosquitto.port, job="bsp", worker_id=f"mpy-{i}",
                model="mlp:64-32-10", max_iterations=0, verbose=False, seed=i + 1,
            )
        )  # fmt: skip
    serve = start_serve(mosquitto.port, "bsp", "bsp", "0.8")
    workers = [
        subprocess.Popen(
            [micropython, str(FIRMWARE / "main.py"), str(c)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=MPY_ENV,
            cwd=c.parent,
        )  # fmt: skip
        for c in configs
    ]
    try:
        # Execute
        outs = [w.communicate(timeout=180)[0] for w in workers]
        out, err = serve.communicate(timeout=60)
    finally:
        for p in [*workers, serve]:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert: both stopped on done; BSP kept their clocks within one round
    for w, text in zip(workers, outs, strict=True):
        assert w.returncode == 0 and "stopped: done" in text, text
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "target_accuracy", err
    clocks = [summary["workers"][f"mpy-{i}"]["clock"] for i in range(2)]
    assert min(clocks) > 0 and max(clocks) - min(clocks) <= 1


def test_board_worker_trains_next_to_cpython_workers(micropython, mosquitto, tmp_path):
    # Prepare: one board and two `edgeps worker` processes, ready before the
    # DSP job starts
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="mixed", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=True,
    )  # fmt: skip
    board, cpython = start_board_and_cpython_workers(
        micropython, cfg, tmp_path, mosquitto.port, "mixed"
    )
    serve = None
    try:
        # Execute: the job starts with every worker waiting for it
        serve = start_serve(mosquitto.port, "mixed", "dsp", "0.85")
        code, text = board.finish(timeout=180)
        out, err = serve.communicate(timeout=60)
        codes = [p.finish(timeout=30)[0] for p in cpython]
    finally:
        for p in [board, *cpython]:
            p.kill()
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)
    # Assert: every worker's updates were accepted and counted in the summary
    assert code == 0 and "stopped: done" in text, text
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "target_accuracy", err
    workers = summary["workers"]
    assert workers["mpy-1"]["accepted"] > 0 and workers["mpy-1"]["rejected"] == 0
    assert workers["py-1"]["accepted"] > 0 and workers["py-2"]["accepted"] > 0
    assert codes == [0, 0]
