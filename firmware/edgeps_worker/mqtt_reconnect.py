"""MQTT client that reconnects with backoff and restores its subscriptions."""

from edgeps_worker.mqtt import MQTTClient
from edgeps_worker.mqtt_link import ECONNRESET, sleep_ms


def _jitter(delay):
    """Up to a quarter of delay at random (none on a port without random)."""
    try:
        from random import getrandbits
    except ImportError:
        return 0
    return getrandbits(8) * delay // 1024


class ReconnectingClient(MQTTClient):
    """An MQTTClient whose publish/subscribe/poll survive a broker restart.

    After an established session fails (OSError), the next call reconnects
    with exponential backoff plus jitter (so a fleet of boards does not
    reconnect in lockstep), re-subscribes, and retries the operation once.
    A QoS 1 publish interrupted this way may reach the broker twice; the
    receiver dedups by sequence number. ``attempts`` bounds one recovery;
    after that the OSError reaches the caller.
    """

    def __init__(
        self, client_id, *args, backoff_ms=100, max_backoff_ms=5000, attempts=8, **kw
    ):
        MQTTClient.__init__(self, client_id, *args, **kw)
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.attempts = attempts
        self._will = None
        self._subs = []
        self._session = False
        self.reconnects = 0

    def connect(
        self, will_topic=None, will_payload=None, will_retain=False, clean=True
    ):
        """Connect once (OSError on failure) and remember the will for reconnects."""
        self._will = (will_topic, will_payload, will_retain, clean)
        MQTTClient.connect(self, will_topic, will_payload, will_retain, clean)
        self._subs = []
        self._session = True

    def subscribe(self, topic, qos=1):
        """Subscribe now and again after every reconnect."""
        self._call(MQTTClient.subscribe, topic, qos)
        for s in self._subs:
            if s[0] == topic:
                self._subs.remove(s)
                break
        self._subs.append((topic, qos))

    def publish(self, topic, payload, qos=1, retain=False):
        """Publish; on a dead link reconnect and publish again."""
        self._call(MQTTClient.publish, topic, payload, qos, retain)

    def poll(self, timeout_ms):
        """Poll; a dead link is reconnected and polled again."""
        return self._call(MQTTClient.poll, timeout_ms)

    def close(self):
        """Leave for good: no more reconnects."""
        self._session = False
        MQTTClient.close(self)

    def _call(self, fn, *args):
        if self._session and self._link is None:
            self.reconnect()
        try:
            return fn(self, *args)
        except OSError:
            if not self._session:
                raise
            self.reconnect()
            return fn(self, *args)

    def reconnect(self):
        """Reconnect with backoff and restore subscriptions; OSError if it fails."""
        self.close_link()
        if self._will is None:
            raise OSError(ECONNRESET, "never connected")
        delay = self.backoff_ms
        err = None
        for _ in range(self.attempts):
            try:
                MQTTClient.connect(self, *self._will)
                for topic, qos in self._subs:
                    MQTTClient.subscribe(self, topic, qos)
                self.reconnects += 1
                return
            except OSError as e:
                err = e
                self.close_link()
            sleep_ms(delay + _jitter(delay))
            delay = min(self.max_backoff_ms, delay * 2)
        raise OSError(ECONNRESET, "reconnect failed: %r" % (err,))
