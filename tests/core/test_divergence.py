"""A diverging job is seen, said and backed off; a learning one is left alone."""

from __future__ import annotations

import pytest
from edgeps.core.divergence import BACKED_OFF, DIVERGING, LEARNING, DivergenceWatch
from edgeps.sim import SimConfig, simulate


def feed(watch: DivergenceWatch, accs: list[float], non_finite: list[int]):
    verdicts = []
    for acc, nf in zip(accs, non_finite, strict=True):
        verdicts.append(
            watch.check(non_finite_total=nf, accuracy=acc, params_finite=True)
        )
    return verdicts


def test_a_learning_job_stays_learning_at_full_step() -> None:
    watch = DivergenceWatch()
    verdicts = feed(watch, [0.1, 0.4, 0.6, 0.55, 0.7, 0.8], [0] * 6)
    assert {v.state for v in verdicts} == {LEARNING}
    assert watch.step_scale == 1.0 and watch.advice(0.1) == ""


def test_non_finite_pushes_cut_the_step_once_per_cooldown() -> None:
    watch = DivergenceWatch(backoff=0.5, min_non_finite=3, cooldown=2)
    # running totals of non-finite pushes: 5 new, 5 new, 5 new, then none
    verdicts = feed(watch, [0.5] * 6, [5, 10, 15, 15, 15, 15])
    assert [v.backed_off for v in verdicts] == [True, False, True, False, False, False]
    assert watch.step_scale == 0.25 and watch.backoffs == 2
    assert verdicts[0].state == DIVERGING and "5 pushes turned non-finite" in (
        verdicts[0].reason
    )
    assert verdicts[-1].state == BACKED_OFF
    assert "--lr 0.025" in watch.advice(0.1)


def test_a_few_non_finite_pushes_are_not_divergence() -> None:
    watch = DivergenceWatch(min_non_finite=3)
    assert feed(watch, [0.5, 0.6], [2, 4])[-1].state == LEARNING


def test_an_accuracy_collapse_for_two_evaluations_is_divergence() -> None:
    watch = DivergenceWatch(accuracy_drop=0.2)
    verdicts = feed(watch, [0.5, 0.9, 0.6, 0.5], [0] * 4)
    assert [v.state for v in verdicts] == [LEARNING, LEARNING, LEARNING, DIVERGING]
    assert "fell from 0.900 to 0.500" in verdicts[-1].reason


def test_most_pushes_clipped_as_outsized_is_divergence() -> None:
    watch = DivergenceWatch(min_non_finite=3)
    v = watch.check(
        non_finite_total=0,
        accuracy=0.5,
        params_finite=True,
        applied_total=40,
        outsized_total=30,
    )
    assert v.state == DIVERGING and "outsized" in v.reason
    # one attacker's clipped pushes among many applied ones are not
    calm = DivergenceWatch(min_non_finite=3)
    ok = calm.check(
        non_finite_total=0,
        accuracy=0.5,
        params_finite=True,
        applied_total=500,
        outsized_total=40,
    )
    assert ok.state == LEARNING


def test_non_finite_parameters_are_divergence() -> None:
    watch = DivergenceWatch()
    v = watch.check(non_finite_total=0, accuracy=None, params_finite=False)
    assert v.state == DIVERGING and v.backed_off


def test_no_backoff_when_disabled_but_still_said() -> None:
    watch = DivergenceWatch(backoff=1.0)
    v = feed(watch, [0.5], [9])[0]
    assert v.state == DIVERGING and not v.backed_off and watch.step_scale == 1.0
    assert "not changed" in watch.advice(0.1)


@pytest.mark.parametrize("bad", [0.0, 1.5])
def test_the_backoff_factor_is_checked(bad: float) -> None:
    with pytest.raises(ValueError):
        DivergenceWatch(backoff=bad)


def test_the_simulator_says_when_the_old_step_diverges_and_not_with_the_default() -> (
    None
):
    old = SimConfig(
        scenario="homogeneous",
        n_workers=32,
        lr_workers=0,
        target_accuracy=0.93,
        max_time=15.0,
    )
    new = SimConfig(
        scenario="homogeneous", n_workers=32, target_accuracy=0.93, max_time=15.0
    )
    bad, good = simulate(old), simulate(new)
    assert bad.state != LEARNING and bad.step_backoffs >= 1
    assert good.state == LEARNING and good.time_to_target is not None
    assert good.rejected == {}
