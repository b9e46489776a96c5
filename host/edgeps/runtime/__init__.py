"""The host runtime: the coordinator thread that owns the ParameterServer over MQTT."""
