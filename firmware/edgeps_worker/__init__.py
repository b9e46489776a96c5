"""The edgeps worker: runs unchanged on MicroPython (ESP32) and CPython."""

VERSION = "0.1.0"
