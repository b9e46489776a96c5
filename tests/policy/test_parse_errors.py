"""Every policy's text form refuses a bad parameter with a line that names it."""

from __future__ import annotations

import pytest
from edgeps.policy.parse import PARAMETERS, POLICIES, parse_policy

# a value each parameter refuses: not a number, or out of its range
BAD_VALUE = {
    "ssp": ("s", "-1"),
    "dsp": ("w", "abc"),
    "kofn": ("k", "0"),
    "dssp": ("sl", "x"),
    "fedavg": ("deadline", "0"),
    "fedbuff": ("k", "many"),
    "fedasync": ("a", "2"),
}
WITH_PARAMETERS = [name for name in POLICIES if PARAMETERS[name]]


def test_every_policy_lists_its_parameters() -> None:
    assert set(PARAMETERS) == set(POLICIES)
    assert set(BAD_VALUE) == set(WITH_PARAMETERS)
    assert {"w", "rounds", "grace"} <= set(PARAMETERS["dsp"])


@pytest.mark.parametrize("name", WITH_PARAMETERS)
def test_an_unknown_parameter_is_named_with_the_known_ones(name: str) -> None:
    # Execute
    with pytest.raises(ValueError) as err:
        parse_policy(f"{name}:window=8")
    # Assert
    text = str(err.value)
    assert "unknown parameter 'window'" in text and "TypeError" not in text
    assert "known: " + ", ".join(PARAMETERS[name]) in text


@pytest.mark.parametrize("name", ["bsp", "asp"])
def test_a_policy_without_parameters_says_so(name: str) -> None:
    with pytest.raises(ValueError, match="takes no parameters"):
        parse_policy(f"{name}:window=8")


@pytest.mark.parametrize("name", WITH_PARAMETERS)
def test_a_bad_value_names_the_parameter_and_the_value(name: str) -> None:
    # Prepare
    key, value = BAD_VALUE[name]
    text = f"kofn:k={value}" if name == "kofn" else f"{name}:{key}={value}"
    # Execute
    with pytest.raises(ValueError) as err:
        parse_policy(text)
    # Assert
    message = str(err.value)
    assert text in message and f" {key} " in message and value in message


def test_the_dsp_window_typo_gets_a_clear_answer() -> None:
    with pytest.raises(ValueError) as err:
        parse_policy("dsp:window=8")
    assert str(err.value) == (
        "policy 'dsp:window=8': dsp: unknown parameter 'window' (known: "
        + ", ".join(PARAMETERS["dsp"])
        + ")"
    )
