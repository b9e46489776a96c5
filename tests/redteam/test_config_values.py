"""Red team, `edgeps serve --config` with hostile values: every one is refused at
start with exit 2 and one line naming the key, never a traceback mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.redteam._held import held, refused_cleanly, serve


@pytest.mark.parametrize("value", ["inf", "nan", "-1.0", "1e300"])
def test_dashboard_linger_out_of_range(tmp_path: Path, value: str) -> None:
    # Prepare: the value that used to raise OverflowError when the job ended
    conf = tmp_path / "serve.toml"
    conf.write_text(
        f'dashboard = "127.0.0.1:{free_port()}"\ndashboard-linger = {value}\n'
    )

    # Execute
    done = serve("--config", str(conf))

    # Assert: refused at start, naming the key, before any job ran
    refused_cleanly(done, f"dashboard-linger = {value}", "--dashboard-linger")


# the bad configurations of the red-team run, each a TOML text
CASES = {
    "lr string": 'lr = "fast"',
    "seed float": "seed = 1.5",
    "json string": 'json = "yes"',
    "max-chunk float": "max-chunk = 1e9",
    "max-chunk 2^63-1": "max-chunk = 9223372036854775807",
    "keepalive -5": "keepalive = -5",
    "keepalive 0": "keepalive = 0",
    "max-time inf": "max-time = inf",
    "eval-interval nan": "eval-interval = nan",
    "job a/b": 'job = "a/b"',
    "policy int": "policy = 5",
    "policy ssp:-1": 'policy = "ssp:-1"',
    "policy kofn:k=0": 'policy = "kofn:k=0"',
    "policy dsp:w=nan": 'policy = "dsp:w=nan"',
    "compress topk:0": 'compress = "topk:0"',
    "compress topk:nan": 'compress = "topk:nan"',
    "seed -1": "seed = -1",
    "seed 2^63-1": "seed = 9223372036854775807",
    "broker int in [serve]": "[serve]\nbroker = 123",
    "unknown key": "foo = 1",
    "underscore key": "max_time = 3",
    "duplicate key": "lr = 0.1\nlr = 0.2",
    "not toml": "lr = = 1",
    "hmac-key-file dir": 'hmac-key-file = "{tmp}"',
    "log-level DEBUG": 'log-level = "DEBUG"',
    "max-update-norm -1": "max-update-norm = -1",
    "norm-guard 0.5": "norm-guard = 0.5",
    "checkpoint in missing dir": 'checkpoint = "/nonexistent/x.npz"',
    "dashboard port 70000": 'dashboard = "127.0.0.1:70000"',
    "liveness-timeout 1e308": "liveness-timeout = 1e308",
    "target-accuracy 1.5": "target-accuracy = 1.5",
    "dashboard-linger inf": 'dashboard = "127.0.0.1:9"\ndashboard-linger = inf',
    "model bogus": 'model = "mlp:33-0-6"',
    "model huge": 'model = "mlp:33-100000000-6"',
    "dataset bogus": 'dataset = "../../etc/passwd"',
    "optimizer bogus": 'optimizer = "sgd; rm"',
}

# one interpreter runs every case through the CLI (36 starts would cost minutes)
DRIVER = """
import contextlib, io, json, sys, traceback
from edgeps.cli import main
out = {}
for name, (path, extra) in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["serve", "--config", path, "--broker", "mqtt://127.0.0.1:9",
                       "--quiet", *extra])
        except SystemExit as exc:
            rc = exc.code
        except BaseException:
            rc = "raised"
            traceback.print_exc(file=err)
    out[name] = {"rc": rc, "stderr": err.getvalue()}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_bad_toml_configs_are_clear_errors(tmp_path: Path) -> None:
    # Prepare
    paths: dict[str, tuple[str, list[str]]] = {}
    for i, (name, text) in enumerate(CASES.items()):
        path = tmp_path / f"c{i}.toml"
        path.write_text(text.replace("{tmp}", str(tmp_path)) + "\n")
        # the time limit comes from the file where the file sets one
        limited = "max-time" in text or "target" in text
        paths[name] = (str(path), [] if limited else ["--max-time", "2"])

    # Execute
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(paths)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = json.loads(done.stdout)

    # Assert: exit 2 and one error line for each, before any connection
    for name, got in results.items():
        lines = [ln for ln in got["stderr"].splitlines() if ln.strip()]
        ok = (
            got["rc"] == 2
            and "Traceback" not in got["stderr"]
            and len(lines) == 1
            and "error:" in lines[0]
            and "cannot connect" not in lines[0]
        )
        held(ok, f"bad TOML: {name}", got)
    held(len(results) == len(CASES), "bad TOML: every case ran", sorted(results))
