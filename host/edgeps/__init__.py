"""edgeps: one model trained across many sensor boards by an MQTT parameter server."""

__version__ = "0.1.0"
