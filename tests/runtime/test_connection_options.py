"""Connection options, the shared flags, backoff and short model forms: pure logic."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest
from edgeps.kernels import ModelSpec
from edgeps.runtime.config import DEFAULT_MAX_TIME, load_toml, merge
from edgeps.runtime.connection_flags import add_connection_flags, connection_options
from edgeps.runtime.model_forms import complete_model
from edgeps.transport.backoff import Backoff
from edgeps.transport.options import PASSWORD_ENV, ConnectionOptions


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_flags(parser)
    return parser.parse_args(list(argv))


def test_flags_become_one_options_value(tmp_path: Path) -> None:
    # Prepare
    ca, secret = tmp_path / "ca.pem", tmp_path / "pw"
    ca.write_text("pem")
    secret.write_text("s3cret\n")
    args = _parse("--broker", "mqtts://b:8883", "--tls-ca", str(ca),
                  "--username", "u", "--password-file", str(secret),
                  "--keepalive", "7")  # fmt: skip

    # Execute
    opts = connection_options(args)

    # Assert
    assert opts == ConnectionOptions(
        "mqtts://b:8883", username="u", password="s3cret", tls_ca=str(ca), keepalive=7
    )
    assert opts.address.port == 8883 and opts.address.tls


def test_password_comes_from_the_environment_without_a_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "from-env")

    opts = connection_options(_parse("--broker", "mqtt://b", "--username", "u"))

    assert opts.password == "from-env"


def test_broker_is_required_without_a_default() -> None:
    with pytest.raises(SystemExit):
        _parse("--username", "u")


@pytest.mark.parametrize(
    ("opts", "error", "match"),
    [
        (ConnectionOptions("mqtt://b", tls_ca="x.pem"), ValueError, "mqtts"),
        (ConnectionOptions("auto", tls_insecure=True), ValueError, "mqtts"),
        (ConnectionOptions("mqtts://b", tls_ca="/no/ca.pem"), FileNotFoundError,
         "--tls-ca"),
        (ConnectionOptions("mqtt://b", password="p"), ValueError, "--username"),
        (ConnectionOptions("mqtt://b", keepalive=0), ValueError, "--keepalive"),
        (ConnectionOptions("http://b"), ValueError, "scheme"),
        (ConnectionOptions("mqtt://b:0"), ValueError, "port"),
    ],
)  # fmt: skip
def test_bad_options_name_the_flag(
    opts: ConnectionOptions, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        opts.check()


def test_half_a_client_certificate_is_refused(tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("pem")
    with pytest.raises(ValueError, match="together"):
        ConnectionOptions("mqtts://b", tls_cert=str(cert)).check()


def test_a_started_broker_gets_its_url_and_keeps_the_rest() -> None:
    opts = ConnectionOptions("auto", username="u", keepalive=9)

    at = opts.at("mqtt://127.0.0.1:5555")

    assert opts.starts_broker and not at.starts_broker
    assert at == ConnectionOptions("mqtt://127.0.0.1:5555", username="u", keepalive=9)


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    b = Backoff(initial=0.25, maximum=2.0)

    first = [b.next() for _ in range(6)]
    b.reset()
    again = b.next()

    assert first == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert again == 0.25


def test_backoff_jitter_only_shortens_and_is_seeded() -> None:
    a = Backoff(initial=1.0, maximum=8.0, jitter=0.5, rng=random.Random(3))
    b = Backoff(initial=1.0, maximum=8.0, jitter=0.5, rng=random.Random(3))

    da = [a.next() for _ in range(5)]
    db = [b.next() for _ in range(5)]

    assert da == db
    for got, full in zip(da, [1.0, 2.0, 4.0, 8.0, 8.0], strict=True):
        assert full * 0.5 <= got <= full
    assert da != [1.0, 2.0, 4.0, 8.0, 8.0]


@pytest.mark.parametrize(
    ("text", "features", "classes", "full"),
    [
        ("softmax", 33, 6, "softmax:33x6"),
        ("logistic", 30, 2, "logistic:30"),
        ("linear", 8, 2, "linear:8"),
        ("mlp", 33, 6, "mlp:33-32-6"),
        ("mlp:64", 64, 10, "mlp:64-64-10"),
        ("mlp:64-32", 64, 10, "mlp:64-64-32-10"),
        ("mlp:16:tanh", 33, 6, "mlp:33-16-6:tanh"),
        ("mlp:30-32-6", 33, 6, "mlp:30-32-6"),  # full specs pass unchanged
        ("softmax:64x10", 33, 6, "softmax:64x10"),
    ],
)
def test_short_model_forms_are_completed_from_the_data(
    text: str, features: int, classes: int, full: str
) -> None:
    got = complete_model(text, features, classes)

    assert got == full
    assert str(ModelSpec.parse(got)) == full


@pytest.mark.parametrize("text", ["mlp:", "mlp:x", "mlp:0", "mlp:-3"])
def test_bad_short_forms_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="bad model spec"):
        complete_model(text, 33, 6)


def test_logistic_needs_binary_data() -> None:
    with pytest.raises(ValueError, match="2 classes"):
        complete_model("logistic", 33, 6)


def test_serve_stops_by_itself_without_a_target_or_time_limit() -> None:
    notes: list[str] = []

    bare = merge({}, note=notes.append)
    with_target = merge({"target_accuracy": 0.9}, note=notes.append)
    with_limit = merge({"max_time": 5.0}, note=notes.append)

    assert bare.max_time == DEFAULT_MAX_TIME and len(notes) == 1
    assert with_target.max_time is None and with_target.target_accuracy == 0.9
    assert with_limit.max_time == 5.0


def test_toml_keys_are_spelled_as_the_flags(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text('target-accuracy = 0.9\ntls-insecure = true\nlog-level = "info"\n')
    bad.write_text("target_accuracy = 0.9\n")

    values = load_toml(good)

    assert values == {"target_accuracy": 0.9, "tls_insecure": True, "log_level": "info"}
    with pytest.raises(ValueError, match="target_accuracy -> target-accuracy"):
        load_toml(bad)


@pytest.mark.parametrize(
    ("model", "full"), [("softmax", "softmax:33x6"), ("mlp:16", "mlp:33-16-6")]
)
def test_serve_trains_a_short_model_form_on_its_dataset(model: str, full: str) -> None:
    from edgeps.runtime.job import load_model

    loaded = load_model(merge({"model": model, "dataset": "sensors"}))

    assert str(loaded.spec) == full
