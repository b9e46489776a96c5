"""One Flower FedAvg job on an edgeps job file: a real server and N client processes.

Runs in Flower's own environment (tools/peers/flower/setup.sh). The job file
(tools/peers/export_job.py) gives each client its shard, the model, the
initial weights, lr, batch, H and its emulated compute time per step. The
server is Flower's legacy gRPC server (`flwr.server.start_server`, in this
process) with Flower's `FedAvg` strategy and a server-side evaluation of the
global model on the job's test rows after every round; each client is a
process of its own running `flwr.client.start_client` with a `NumPyClient`
that trains H local SGD steps, sleeping each step up to its emulated time: an
MLP in numpy (flower_numpy.py), any other model (LeNet-5) with edgeps' own
kernels imported from this checkout (edgeps_model.py). All of it on
127.0.0.1 at the port given.

Clients load and import first, then all connect at once, so no client's
start-up counts. The clock starts when the first client registers with the
server and stops when an evaluation reaches the target; the loop then ends
(a `Server` subclass runs Flower's own `fit_round` and `strategy.evaluate`
round by round, so it can stop at the target or the time bound). Prints one
JSON line: flwr's version, seconds to target, rounds, final accuracy, and the
model payload bytes carried (the parameter tensors, without gRPC framing).

    python run_flower.py JOB.npz --port P [--max-time 60]
"""

from __future__ import annotations

import os

# Flower sends usage telemetry unless told not to; read when flwr is imported
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import argparse  # noqa: E402
import json  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flower_numpy import Compute, LocalTrainer, Mlp  # noqa: E402

READY_TIMEOUT = 120.0  # s for every client to import flwr and load its shard
LISTEN_TIMEOUT = 30.0  # s for the server's port to accept connections


def load_job(path: str) -> dict[str, Any]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def model_of(job: dict[str, Any]) -> Any:
    """The job's model: the numpy MLP, or edgeps' kernels for any other kind."""
    if str(job.get("kind", "mlp")) == "mlp":
        return Mlp(tuple(int(s) for s in job["sizes"]), str(job["activation"]))
    from edgeps_model import KernelModel

    return KernelModel(str(job["model"]))


def gradient_code(model: Any) -> str:
    """Which code computes the clients' gradients, for the JSON line."""
    backend = getattr(model, "backend", None)
    return "numpy (flower_numpy.Mlp)" if backend is None else f"edgeps {backend}"


# -- a client process --


def run_client(job: dict[str, Any], index: int, address: str) -> int:
    import flwr

    seed = int(job["seed"])
    trainer = LocalTrainer(
        model_of(job),
        job[f"X_{index}"],
        job[f"y_{index}"],
        batch=int(job["batch"]),
        lr=float(job["lr"]),
        shuffle_seed=int(job["shuffle_seed"][index]),
        compute=Compute(
            float(job["typical"][index]),
            float(job["jitter"][index]),
            float(job["interference_p"][index]),
            float(job["interference_factor"][index]),
        ),
        compute_seed=[seed, index],
    )
    steps = int(job["local_steps"])

    class SensorClient(flwr.client.NumPyClient):
        def get_parameters(self, config: dict[str, Any]) -> list[np.ndarray]:
            return [np.asarray(job["init"], dtype=np.float32)]

        def fit(
            self, parameters: list[np.ndarray], config: dict[str, Any]
        ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
            began = time.perf_counter()
            new = trainer.train(parameters[0], steps, time.perf_counter, time.sleep)
            # the samples trained on, as an edgeps UPDATE counts them
            return [new], steps * trainer.batch, {"fit_s": time.perf_counter() - began}

    print("ready", flush=True)
    # wait (bounded) for the launcher's go, so every client connects at once
    ready, _, _ = select.select([sys.stdin], [], [], READY_TIMEOUT + LISTEN_TIMEOUT)
    if not ready or sys.stdin.readline().strip() != "go":
        return 3
    flwr.client.start_client(
        server_address=address,
        client=SensorClient().to_client(),
        insecure=True,
        max_retries=3,  # a server that went away ends the client
        max_wait_time=30.0,
    )
    return 0


# -- the server --


def _wait_listening(port: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def run_server(job: dict[str, Any], port: int, max_time: float, npz: str) -> dict:
    import flwr
    from flwr.common import ndarrays_to_parameters
    from flwr.server import Server, ServerConfig, SimpleClientManager
    from flwr.server.strategy import FedAvg

    n = int(job["n_workers"])
    model = model_of(job)
    X_test, y_test = job["X_test"], job["y_test"]
    target = float(job["target"])
    state: dict[str, Any] = {
        "first_register": None,
        "reached_at": None,
        "rounds": 0,
        "accuracy": None,
        "bytes_down": 0,
        "bytes_up": 0,
        "failures": 0,
        "registered": [],
        "round_seconds": [],
        "client_fit_max": [],
    }

    class TimedClientManager(SimpleClientManager):
        def register(self, client: Any) -> bool:
            now = time.monotonic()
            if state["first_register"] is None:
                state["first_register"] = now
            state["registered"].append(now - state["first_register"])
            return super().register(client)

        def wait_for(self, num_clients: int, timeout: int = 0) -> bool:
            # bounded: a client that never connects ends the run, not the day
            return super().wait_for(num_clients, int(READY_TIMEOUT + LISTEN_TIMEOUT))

    def evaluate(server_round: int, arrays: list[np.ndarray], config: Any) -> Any:
        acc = model.accuracy(np.asarray(arrays[0], np.float32), X_test, y_test)
        state["accuracy"] = acc
        return 0.0, {"accuracy": acc}

    class TargetServer(Server):
        """Flower's round loop, stopped at the target accuracy or the time bound."""

        def fit(self, num_rounds: int, timeout: float | None) -> Any:
            history = flwr.server.History()
            self.parameters = self._get_initial_parameters(0, timeout)
            self.strategy.evaluate(0, parameters=self.parameters)
            for rnd in range(1, num_rounds + 1):
                # round 1 waits for every client: the clock starts at the first
                t0 = state["first_register"] or time.monotonic()
                left = max_time - (time.monotonic() - t0)
                if left <= 0:
                    break
                sent = sum(len(t) for t in self.parameters.tensors)
                began = time.monotonic()
                res = self.fit_round(server_round=rnd, timeout=left)
                state["round_seconds"].append(round(time.monotonic() - began, 3))
                if res is not None:
                    params, _, (results, failures) = res
                    state["bytes_down"] += sent * (len(results) + len(failures))
                    state["bytes_up"] += sum(
                        len(t) for _, r in results for t in r.parameters.tensors
                    )
                    state["failures"] += len(failures)
                    fits = [float(r.metrics.get("fit_s", 0.0)) for _, r in results]
                    state["client_fit_max"].append(round(max(fits, default=0.0), 3))
                    if params:
                        self.parameters = params
                state["rounds"] = rnd
                self.strategy.evaluate(rnd, parameters=self.parameters)
                if state["accuracy"] is not None and state["accuracy"] >= target:
                    state["reached_at"] = time.monotonic()
                    break
            return history, time.monotonic() - started

    init = np.asarray(job["init"], dtype=np.float32)
    strategy = FedAvg(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=n,
        min_evaluate_clients=0,
        min_available_clients=n,
        evaluate_fn=evaluate,
        initial_parameters=ndarrays_to_parameters([init]),
    )
    manager = TimedClientManager()
    server = TargetServer(client_manager=manager, strategy=strategy)
    # Flower's default pool is min(32, cores + 4) threads: on a small box some
    # clients would only get their round's instructions when others finished
    server.set_max_workers(n)
    clients = _spawn_clients(npz, n, port)
    go = threading.Thread(target=_release, args=(clients, port), daemon=True)
    go.start()
    started = time.monotonic()
    try:
        flwr.server.start_server(
            server_address=f"127.0.0.1:{port}",
            server=server,
            config=ServerConfig(num_rounds=1_000_000, round_timeout=max_time),
        )
    finally:
        codes = [_end(p, 10.0) for p in clients]
    t0, reached = state["first_register"], state["reached_at"]
    return {
        "framework": "flower",
        "flwr_version": flwr.__version__,
        "strategy": "FedAvg",
        "model": str(job["model"]),
        "gradient": gradient_code(model),
        "clients": n,
        "client_processes": True,
        "local_steps": int(job["local_steps"]),
        "scenario": str(job["scenario"]),
        "seed": int(job["seed"]),
        "target_accuracy": target,
        "time_to_target": None if reached is None else reached - t0,
        "rounds": state["rounds"],
        "final_accuracy": state["accuracy"],
        "payload_bytes_down": state["bytes_down"],
        "payload_bytes_up": state["bytes_up"],
        "failures": state["failures"],
        "client_exit_codes": codes,
        # when each client registered, s after the first; each round's fit
        "registered": [round(t, 3) for t in state["registered"]],
        "round_seconds": state["round_seconds"],
        "client_fit_max": state["client_fit_max"],
        "wall_seconds": time.monotonic() - started,
    }


def _spawn_clients(npz: str, n: int, port: int) -> list[subprocess.Popen[str]]:
    me = str(Path(__file__).resolve())
    return [
        subprocess.Popen(
            [sys.executable, me, npz, "--port", str(port), "--client", str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i in range(n)
    ]


def _release(clients: list[subprocess.Popen[str]], port: int) -> None:
    """When every client is ready and the server listens: tell them all to go."""
    end = time.monotonic() + READY_TIMEOUT
    for p in clients:
        assert p.stdout is not None
        left = max(0.0, end - time.monotonic())
        ready, _, _ = select.select([p.stdout], [], [], left)
        if not ready or p.stdout.readline().strip() != "ready":
            return  # the server's round times out; the run reports no target
    if not _wait_listening(port, LISTEN_TIMEOUT):
        return
    for p in clients:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def _end(proc: subprocess.Popen[str], timeout: float) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", help="the .npz tools/peers/export_job.py wrote")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-time", type=float, default=60.0)
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    job = load_job(args.job)
    if args.client is not None:
        return run_client(job, args.client, f"127.0.0.1:{args.port}")
    result = run_server(job, args.port, args.max_time, args.job)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
