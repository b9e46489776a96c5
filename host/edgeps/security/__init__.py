"""Key and broker-credential tooling: per-device keys, mosquitto ACL configs."""
