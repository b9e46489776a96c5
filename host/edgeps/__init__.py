"""edgeps: train one model across many sensor boards with a parameter server over MQTT."""

__version__ = "0.1.0"
