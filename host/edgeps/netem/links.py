"""Shaped links of worker profiles: the ``--link-*`` overrides, each profile's shape.

A profile with ``link_rate`` set (``WorkerProfile.link_rate``, bits/s, 0 for
no limit) has a shaped link: the emulator passes its real MQTT bytes through
``edgeps.netem.shaper`` and the simulator prices its messages with the
same ``LinkPipe`` (``edgeps.netem.shaping``). Jitter is not modelled on a
shaped link.
"""

from __future__ import annotations

from dataclasses import replace

from edgeps.netem.shaping import LinkShape
from edgeps.workloads.scenarios import WorkerProfile


def with_links(
    profiles: dict[str, WorkerProfile],
    *,
    rate: float | None = None,
    delay: float | None = None,
    loss: float | None = None,
) -> dict[str, WorkerProfile]:
    """Every profile with the given link figures; any one given makes the links shaped.

    ``rate`` is bits/s; a ``delay`` or ``loss`` without a rate shapes the link
    without a bandwidth limit (unless the profile already has a rate).
    """
    if rate is None and delay is None and loss is None:
        return dict(profiles)
    out = {}
    for wid, p in profiles.items():
        new_rate = rate if rate is not None else (p.link_rate or 0.0)
        out[wid] = replace(
            p,
            link_rate=new_rate,
            link_delay=p.link_delay if delay is None else delay,
            loss_p=p.loss_p if loss is None else loss,
        )
    return out


def is_shaped(profile: WorkerProfile) -> bool:
    return profile.link_rate is not None


def link_shape(profile: WorkerProfile) -> LinkShape:
    """The shape of each direction of this profile's link (the same both ways)."""
    return LinkShape(
        rate=profile.link_rate or 0.0, delay=profile.link_delay, loss=profile.loss_p
    )
