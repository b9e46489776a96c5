"""One spelling per concept across every `edgeps` subcommand's flags."""

from __future__ import annotations

import argparse

import pytest
from edgeps.cli import COMMANDS, build_parser
from edgeps.commands.bench import BENCHMARKS
from edgeps.runtime.config import KEYS

# concept -> (the one allowed spelling, spellings that must not appear)
CONCEPTS: dict[str, tuple[str, set[str]]] = {
    "broker": ("--broker", {"--url", "--broker-url", "--mqtt", "--mqtt-url"}),
    "tls ca": ("--tls-ca", {"--ca", "--cafile", "--ca-file", "--tls-cafile"}),
    "tls cert": ("--tls-cert", {"--cert", "--certfile", "--cert-file"}),
    "tls key": ("--tls-key", {"--key", "--keyfile", "--tls-keyfile"}),
    "tls insecure": ("--tls-insecure", {"--insecure", "--no-verify"}),
    "user": ("--username", {"--user", "--mqtt-user", "-u"}),
    "password": (
        "--password-file",
        {"--password", "--passwd", "--pw", "--passwd-file", "--pass-file"},
    ),
    "keepalive": ("--keepalive", {"--keep-alive"}),
    "hmac key": ("--hmac-key-file", {"--hmac-key", "--hmac", "--key-file"}),
    "log level": ("--log-level", {"-v", "--verbose", "--debug", "--loglevel"}),
    "time limit": ("--max-time", {"--duration", "--time-limit", "--timeout"}),
    "target": ("--target-accuracy", {"--target", "--target-acc"}),
    "worker id": ("--id", {"--worker-id", "--wid"}),
    "job": ("--job", {"--job-id"}),
    "minibatch": ("--batch", {"--batch-size", "--minibatch"}),
    "repetitions": ("--repeat", {"--repeats", "--runs"}),
    "iterations": ("--max-iterations", {"--iterations", "--steps"}),
}
CONNECTION_FLAGS = {
    "--broker", "--username", "--password-file", "--tls-ca", "--tls-cert",
    "--tls-key", "--tls-insecure", "--keepalive", "--hmac-key-file", "--log-level",
}  # fmt: skip
MQTT_COMMANDS = ("serve", "worker", "emulate", "demo", "relay")


def _walk(parser: argparse.ArgumentParser, path: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {path: set()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_walk(sub, f"{path} {name}"))
        else:
            out[path].update(action.option_strings)
    return out


def all_flags() -> dict[str, set[str]]:
    """Every (sub)command path -> its option strings, each parser fully built."""
    flags: dict[str, set[str]] = {}
    for name in COMMANDS:
        root = build_parser(name, [name, *BENCHMARKS])
        sub = next(
            a for a in root._actions if isinstance(a, argparse._SubParsersAction)
        )
        flags.update(_walk(sub.choices[name], name))
    return flags


FLAGS = all_flags()


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_no_divergent_spelling_of_a_concept(command: str) -> None:
    used = FLAGS[command]

    wrong = {
        concept: sorted(used & forbidden)
        for concept, (_, forbidden) in CONCEPTS.items()
        if used & forbidden
    }

    assert wrong == {}, f"{command}: use {[CONCEPTS[c][0] for c in wrong]}"


@pytest.mark.parametrize("command", MQTT_COMMANDS)
def test_every_mqtt_command_has_the_same_connection_flags(command: str) -> None:
    assert FLAGS[command] >= CONNECTION_FLAGS


def test_the_walk_sees_nested_benchmarks_and_their_flags() -> None:
    # the spelling test is only as good as its view of the parsers
    assert "--repeat" in FLAGS["bench kernels"]
    assert "--repeat" in FLAGS["bench core"]
    assert "--batch" in FLAGS["simulate"]


def test_serve_config_keys_are_exactly_the_serve_flags() -> None:
    flags = {f[2:] for f in FLAGS["serve"] if f.startswith("--")}
    negations = {f for f in flags if f.startswith("no-") and f[3:] in flags}

    keys = set(KEYS)

    assert keys == flags - negations - {"help", "config"}


def test_every_command_taking_a_user_takes_its_password_from_a_file_only() -> None:
    users = sorted(cmd for cmd, used in FLAGS.items() if "--username" in used)

    missing = [cmd for cmd in users if "--password-file" not in FLAGS[cmd]]
    on_the_line = [cmd for cmd, used in FLAGS.items() if "--password" in used]

    assert set(MQTT_COMMANDS) <= set(users)
    assert missing == [] and on_the_line == []
