"""The emulator's shaped links: one proxy port per sensor whose profile has a link rate.

Sensors with a shaped profile (see ``edgeps.netem.links``) connect to
their own 127.0.0.1 port of a ``ShapingProxy`` instead of the broker, so
every MQTT byte they send and receive (HELLO, MODEL, updates, releases,
PUBACKs, pings) crosses their slow link; the others connect directly.
"""

from __future__ import annotations

from edgeps.netem.links import is_shaped, link_shape
from edgeps.netem.shaper import ShapingProxy
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import WorkerProfile


class SensorLinks:
    """Where each sensor connects, and the bytes its shaped link carried."""

    def __init__(
        self,
        connection: ConnectionOptions,
        profiles: dict[str, WorkerProfile],
        *,
        seed: int = 0,
    ) -> None:
        self.connection = connection
        self.shaped = {w: p for w, p in profiles.items() if is_shaped(p)}
        if self.shaped and connection.wants_tls and not connection.tls_insecure:
            raise ValueError(
                "shaped links are proxied on 127.0.0.1, where the broker's certificate "
                "does not match: use mqtt://, or --tls-insecure in a lab"
            )
        self.seed = seed
        self.proxy: ShapingProxy | None = None
        self._options: dict[str, ConnectionOptions] = {}

    def start(self) -> None:
        if not self.shaped:
            return
        address = self.connection.address
        self.proxy = ShapingProxy(address.host, address.port, seed=self.seed).start()
        scheme = "mqtts" if address.tls else "mqtt"
        for wid, profile in self.shaped.items():
            shape = link_shape(profile)
            port = self.proxy.add(wid, up=shape, down=shape)
            self._options[wid] = self.connection.at(f"{scheme}://127.0.0.1:{port}")

    def options(self, wid: str) -> ConnectionOptions:
        return self._options.get(wid, self.connection)

    def stats(self, wid: str) -> dict[str, int]:
        if self.proxy is None or wid not in self.shaped:
            return {}
        return self.proxy.stats(wid)

    def close(self, into: dict[str, dict[str, int]] | None = None) -> None:
        """Record each shaped link's counts into ``into[wid]``, then close."""
        for wid, counts in (into or {}).items():
            counts.update(self.stats(wid))
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None
