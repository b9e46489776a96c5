"""Builds the `edgeps._native` cffi extension; the metadata is in pyproject.toml.

cffi's documented setuptools integration (`cffi_modules`), with one setting:
build_ext always recompiles, so objects in a stale build/ directory (other
EDGEPS_NATIVE_MARCH flags, older headers) never end up in a wheel.
"""

from setuptools import setup

setup(
    cffi_modules=["native/eps_build.py:ffibuilder"],
    options={"build_ext": {"force": True}},
)
