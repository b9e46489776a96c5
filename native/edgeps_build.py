"""In-tree PEP 517 backend: setuptools plus the cffi extension from native/.

The top level of the repository holds no setup.py, so this backend passes the
cffi module to setuptools itself. It also forces build_ext to recompile every
time: a stale build/ directory must never keep objects built with old flags.
"""

from __future__ import annotations

from setuptools import build_meta as _orig
from setuptools.build_meta import *  # noqa: F401,F403  (re-export the PEP 517 hooks)

CFFI_MODULES = ["native/eps_build.py:ffibuilder"]


class _Backend(_orig._BuildMetaBackend):
    def run_setup(self, setup_script: str = "setup.py") -> None:
        import setuptools
        from setuptools.command.build_ext import build_ext

        class ForcedBuildExt(build_ext):
            def initialize_options(self) -> None:
                super().initialize_options()
                self.force = True

        setuptools.setup(
            cffi_modules=CFFI_MODULES, cmdclass={"build_ext": ForcedBuildExt}
        )


_BACKEND = _Backend()
get_requires_for_build_wheel = _BACKEND.get_requires_for_build_wheel
get_requires_for_build_sdist = _BACKEND.get_requires_for_build_sdist
prepare_metadata_for_build_wheel = _BACKEND.prepare_metadata_for_build_wheel
build_wheel = _BACKEND.build_wheel
build_sdist = _BACKEND.build_sdist
get_requires_for_build_editable = _BACKEND.get_requires_for_build_editable
prepare_metadata_for_build_editable = _BACKEND.prepare_metadata_for_build_editable
build_editable = _BACKEND.build_editable
