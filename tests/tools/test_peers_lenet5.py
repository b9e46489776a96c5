"""tools/peers --job lenet5: the paper's LeNet-5 job on Flower is edgeps' job.

The exported job is what `edgeps serve --dataset mnist --model lenet5` and
`edgeps emulate --dataset mnist --compute-time S` use; the Flower clients'
model (tools/peers/flower/edgeps_model.py) is edgeps' own kernels, imported
from this checkout. No Flower needed, except the last test, which runs a real
Flower server and clients from Flower's own venv and is skipped without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from edgeps import kernels
from edgeps.kernels import ModelSpec
from edgeps.pyworker.batches import Shuffle
from edgeps.pyworker.localdata import load_emulated
from edgeps.runtime.test_data import builtin_test_data, job_spec
from edgeps.transport.broker import free_port
from edgeps.workloads.scenarios import make_scenario

from tests.helpers.peers import PEERS, load_peer

FLOWER_PYTHON = PEERS / "flower" / ".venv" / "bin" / "python"


@pytest.fixture(scope="module")
def export_job() -> ModuleType:
    return load_peer("peers_export_job", "export_job.py")


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return load_peer("peers_compare", "compare.py")


@pytest.fixture(scope="module")
def run_flower() -> ModuleType:
    sys.path.insert(0, str(PEERS / "flower"))
    return load_peer("peers_run_flower", "flower/run_flower.py")


@pytest.fixture(scope="module")
def job(export_job: ModuleType) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = export_job.job_arrays(
        dataset="mnist", model="lenet5", n_workers=4, scenario="stragglers",
        seed=1, local_steps=4, target=0.95, lr=0.05, compute_time=0.01,
    )  # fmt: skip
    return arrays


def test_lenet5_job_is_serves_model_weights_and_test_digits(
    job: dict[str, np.ndarray],
) -> None:
    # Prepare: the model and test rows serve builds for --dataset mnist --model lenet5
    data = builtin_test_data("mnist", 1)
    spec = job_spec("lenet5", data, "'mnist'")

    # Assert
    assert str(job["model"]) == str(spec)
    assert str(job["kind"]) == "conv2d"
    np.testing.assert_array_equal(job["init"], spec.init_params(1))
    np.testing.assert_array_equal(job["X_test"], data.X)
    np.testing.assert_array_equal(job["y_test"], data.y)
    assert len(job["y_test"]) == 1000
    assert float(job["lr"]) == 0.05 and float(job["target"]) == 0.95


def test_lenet5_shards_are_the_emulators_mnist_split(
    job: dict[str, np.ndarray],
) -> None:
    for i in range(4):
        emulated, _ = load_emulated(f"mnist:{i}/4", 1, "iid")
        np.testing.assert_array_equal(job[f"X_{i}"], emulated.X)
        np.testing.assert_array_equal(job[f"y_{i}"], emulated.y)
    assert sum(len(job[f"y_{i}"]) for i in range(4)) == 4000


def test_lenet5_compute_times_are_emulates_scaled_by_flops(
    job: dict[str, np.ndarray],
) -> None:
    # Prepare: what EmulatedTrainer runs with `emulate --compute-time 0.01`
    spec = ModelSpec.parse(str(job["model"]))
    profiles = make_scenario("stragglers", 4, 1).profiles.values()
    scale = spec.macs / spec.n_params  # about 6.85 for LeNet-5

    # Assert
    want = [0.01 * scale * p.straggler_factor for p in profiles]
    np.testing.assert_allclose(job["typical"], want, rtol=1e-12)
    assert max(job["typical"]) / min(job["typical"]) == pytest.approx(4.0)


def test_flower_clients_compute_with_edgeps_kernels(
    run_flower: ModuleType, job: dict[str, np.ndarray]
) -> None:
    # Prepare
    model = run_flower.model_of(job)
    spec = ModelSpec.parse(str(job["model"]))
    X, y = job["X_0"][:32], job["y_0"][:32].astype(np.int32)

    # Execute
    loss, grad = model.loss_and_grad(job["init"], X, y)
    ref_loss, ref_grad = kernels.loss_and_grad(spec, job["init"], X, y)

    # Assert: the same kernels, the same numbers; the JSON says which
    assert loss == float(ref_loss)
    np.testing.assert_array_equal(grad, ref_grad)
    assert run_flower.gradient_code(model) == f"edgeps {kernels.backend_name()}"
    acc = kernels.accuracy(spec, job["init"], job["X_test"], job["y_test"])
    assert model.accuracy(job["init"], job["X_test"], job["y_test"]) == acc


def test_flower_local_round_is_h_sgd_steps_on_edgeps_batches(
    run_flower: ModuleType, job: dict[str, np.ndarray]
) -> None:
    # Prepare: the client trainer with a clock only the sleeps move
    fnp = sys.modules["flower_numpy"]
    model = run_flower.model_of(job)
    now = [0.0]
    trainer = fnp.LocalTrainer(
        model, job["X_2"], job["y_2"], batch=32, lr=0.05, shuffle_seed=3,
        compute=fnp.Compute(0.2, 0.0), compute_seed=[1, 2],
    )  # fmt: skip

    # Execute
    out = trainer.train(
        job["init"], 3, lambda: now[0], lambda s: now.__setitem__(0, now[0] + s)
    )

    # Assert: three SGD steps as an edgeps worker takes them, 0.2 s each
    spec = ModelSpec.parse(str(job["model"]))
    p = job["init"].copy()
    order = Shuffle(len(job["y_2"]), 3)
    y = job["y_2"].astype(np.int32)
    for _ in range(3):
        idx = order.take(32)
        _, g = kernels.loss_and_grad(spec, p, job["X_2"][idx], y[idx])
        p -= np.float32(0.05) * g
    np.testing.assert_allclose(out, p, rtol=1e-5, atol=1e-7)
    assert now[0] == pytest.approx(0.6)


def test_job_lenet5_sets_both_sides_and_flags_override(compare: ModuleType) -> None:
    # Prepare
    parser = compare.argparse.ArgumentParser()
    compare.configure(parser)

    # Execute
    lenet = parser.parse_args(["--job", "lenet5"])
    faster = parser.parse_args(
        ["--job", "lenet5", "--lr", "0.1", "--compute-time", "0.02"]
    )
    sensors = parser.parse_args([])

    # Assert: serve and emulate get the dataset, model, lr and step time
    s = compare.job_settings(lenet)
    assert (s["dataset"], s["model"], s["lr"], s["target"]) == (
        "mnist",
        "lenet5",
        0.05,
        0.95,
    )
    serve, emulate = compare.edgeps_flags(s)
    assert serve == "--dataset mnist --model lenet5 --lr 0.05"
    assert emulate == "--dataset mnist --compute-time 0.01"
    assert compare.edgeps_flags(compare.job_settings(faster)) == (
        "--dataset mnist --model lenet5 --lr 0.1",
        "--dataset mnist --compute-time 0.02",
    )
    assert compare.edgeps_flags(compare.job_settings(sensors)) == ("", "")
    assert compare.target_of(lenet) == 0.95


def test_lenet5_rows_default_to_a_per_step_row_that_converges(
    compare: ModuleType,
) -> None:
    parser = compare.argparse.ArgumentParser()
    compare.configure(parser)
    lenet = parser.parse_args(["--job", "lenet5"])
    sensors = parser.parse_args([])
    mean = "fedavg:agg=mean/h8"  # Flower's FedAvg: McMahan's weighted mean
    assert compare.rows_of(lenet) == [mean, "fedbuff:k=4/h8", "dsp@lr=0.02"]
    assert compare.rows_of(sensors) == [mean, "fedbuff:k=4/h8", "dsp"]
    assert compare.flower_steps(lenet) == [8]
    assert compare.flower_steps(sensors) == [8, 1]


def test_unknown_job_and_bad_lr_are_clear_errors(compare: ModuleType) -> None:
    code = compare.main(["--job", "cifar", "--no-flower", "--no-edgeps"])
    assert code == 2
    assert (
        compare.main(["--job", "lenet5", "--lr", "0", "--no-flower", "--no-edgeps"])
        == 2
    )
    assert (
        compare.main(
            ["--job", "lenet5", "--rows", "dsp@lr=x", "--no-flower", "--no-edgeps"]
        )
        == 2
    )


@pytest.mark.slow
@pytest.mark.skipif(
    not FLOWER_PYTHON.exists(),
    reason="Flower's venv is missing: bash tools/peers/flower/setup.sh makes it",
)
def test_real_flower_runs_lenet5_with_edgeps_kernels(
    export_job: ModuleType, tmp_path: Path
) -> None:
    # Prepare: 2 clients, 2 local steps, a low target so a few rounds reach it
    arrays = export_job.job_arrays(
        dataset="mnist", model="lenet5", n_workers=2, seed=0, local_steps=2,
        target=0.3, lr=0.05, compute_time=0.001,
    )  # fmt: skip
    npz = tmp_path / "job.npz"
    np.savez(npz, **arrays)

    # Execute: a real Flower server and 2 client processes over gRPC
    proc = subprocess.run(
        [str(FLOWER_PYTHON), str(PEERS / "flower" / "run_flower.py"), str(npz),
         "--port", str(free_port()), "--max-time", "60"],
        capture_output=True, timeout=240, check=False,
    )  # fmt: skip

    # Assert
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert result["gradient"] in ("edgeps c", "edgeps numpy")
    assert result["model"] == str(arrays["model"])
    assert result["final_accuracy"] >= 0.3 and result["time_to_target"] is not None
    assert result["client_exit_codes"] == [0, 0]
    # each round carried LeNet-5's 61,706 float32 parameters each way per client
    assert result["payload_bytes_up"] >= 2 * 61706 * 4 * result["rounds"]
