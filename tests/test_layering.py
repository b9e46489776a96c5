"""The package layering, checked on the source: every import runs down the ranks.

Each top-level package (or module) of ``edgeps`` has a rank; a module may
import a package of its own rank or a lower one, never a higher one. Imports
inside functions count too. The CLI's subcommands (``commands``) are imported
by nothing but the CLI, and the lab (benchmarks, planner, policy matrix) by
nothing in the product. The failing arrows are listed in the assertion, so a
reader sees which module reaches up, and to what.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOST = REPO / "host" / "edgeps"

# lower first; a package may import its own rank and below
RANKS: dict[str, int] = {
    "edgeps": 0,  # the package root: its __version__
    "_native": 0,  # the cffi extension, bound by kernels
    "kernels": 0,
    "workloads": 0,
    "core": 1,
    "model": 1,  # scaler, data files, exports: over kernels
    "codecs": 1,
    "policy": 2,
    "transport": 3,
    "security": 3,
    "observe": 3,
    "netem": 4,
    "pyworker": 4,
    "sim": 5,
    "runtime": 5,
    "emulate": 6,
    "relay": 6,
    "boards": 6,
    "lab": 7,
    "commands": 8,
    "cli": 9,
    "__main__": 9,
}
CLI = {"cli", "__main__"}
PRODUCT_MAY_NOT_IMPORT_LAB = {p for p, r in RANKS.items() if r < RANKS["lab"]}


def package_of(module: str) -> str | None:
    """The top-level package of an ``edgeps`` module name; None if not ours."""
    parts = module.split(".")
    if parts[0] != "edgeps":
        return None
    if len(parts) == 1:
        return "edgeps"
    return parts[1]


def source_module(path: Path, host: Path) -> str:
    parts = path.relative_to(host).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("edgeps", *parts))


def imports(path: Path, host: Path) -> Iterator[str]:
    """Every ``edgeps`` module an import names, anywhere in the file.

    ``from edgeps.core import ParameterServer`` names ``edgeps.core``; ``from
    edgeps import kernels`` names ``edgeps.kernels``; a relative import is
    resolved against the file's package.
    """
    here = source_module(path, host)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "edgeps":  # from edgeps import kernels
                names = [f"edgeps.{alias.name}" for alias in node.names]
            else:
                names = [base] if base else []
        else:
            continue
        for name in names:
            if package_of(name) is not None:
                yield name


def arrows(host: Path) -> list[tuple[str, str, str, str]]:
    """(file, source package, imported module, its package) for every import."""
    out = []
    for path in sorted(host.rglob("*.py")):
        src = package_of(source_module(path, host))
        assert src is not None
        seen = set()
        for name in imports(path, host):
            dst = package_of(name)
            assert dst is not None
            # "from edgeps import __version__" names edgeps.__version__: the root
            if dst not in RANKS and not (host / dst).exists():
                dst = "edgeps"
            if dst != src and (name, dst) not in seen:
                seen.add((name, dst))
                rel = str(path.relative_to(host))
                out.append((rel, src, name, dst))
    return out


def upward_arrows(host: Path, ranks: dict[str, int] = RANKS) -> list[str]:
    """Each import of a package of a higher rank, as ``file -> module (a > b)``."""
    bad = []
    for rel, src, name, dst in arrows(host):
        if ranks.get(dst, -1) > ranks.get(src, -1):
            bad.append(
                f"{rel} -> {name} ({dst} {ranks.get(dst)} > {src} {ranks.get(src)})"
            )
    return bad


def commands_importers(host: Path) -> list[str]:
    return [
        f"{rel} -> {name}"
        for rel, src, name, dst in arrows(host)
        if dst == "commands" and src not in CLI
    ]


def lab_importers(host: Path) -> list[str]:
    return [
        f"{rel} -> {name}"
        for rel, src, name, dst in arrows(host)
        if dst == "lab" and src in PRODUCT_MAY_NOT_IMPORT_LAB
    ]


def package_cycles(host: Path) -> list[list[str]]:
    """Cycles in the package graph (same-rank packages included)."""
    graph: dict[str, set[str]] = {}
    for _, src, _, dst in arrows(host):
        graph.setdefault(src, set()).add(dst)
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def top_level_names(host: Path) -> set[str]:
    names = {p.stem for p in host.glob("*.py")}
    names |= {p.parent.name for p in host.glob("*/__init__.py")}
    return names


def test_there_are_modules_to_check() -> None:
    assert top_level_names(HOST) >= {"core", "runtime", "lab", "netem", "pyworker"}
    assert len(arrows(HOST)) > 100


def test_every_package_has_a_rank() -> None:
    assert sorted(top_level_names(HOST) - set(RANKS) - {"__init__"}) == []


def test_no_module_imports_a_package_of_a_higher_rank() -> None:
    assert upward_arrows(HOST) == []


def test_the_commands_are_imported_by_the_cli_only() -> None:
    assert commands_importers(HOST) == []


def test_nothing_in_the_product_imports_the_lab() -> None:
    assert lab_importers(HOST) == []


def test_no_two_packages_import_each_other() -> None:
    assert package_cycles(HOST) == []


def test_every_package_is_in_the_distribution() -> None:
    tomllib = pytest.importorskip("tomllib")
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]
    ours = {
        source_module(p, HOST)
        for p in HOST.rglob("__init__.py")
        if "static" not in p.parts
    }
    assert sorted(ours - set(listed)) == []


def write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_sees_arrows_that_run_up(tmp_path: Path) -> None:
    # the oracles above must be able to fail: a tree that breaks every rule
    host = tmp_path / "edgeps"
    write(host, "__init__.py")
    write(host, "core/__init__.py", "def f():\n    from edgeps.runtime import job\n")
    write(host, "runtime/__init__.py", "from ..lab.bench import core\n")
    write(host, "runtime/job.py", "import edgeps.commands.serve\n")
    write(host, "lab/__init__.py")
    write(host, "lab/bench/__init__.py", "from edgeps import core\n")
    write(host, "commands/__init__.py")
    write(host, "commands/serve.py", "from edgeps import runtime\n")
    assert upward_arrows(host) == [
        "core/__init__.py -> edgeps.runtime (runtime 5 > core 1)",
        "runtime/__init__.py -> edgeps.lab.bench (lab 7 > runtime 5)",
        "runtime/job.py -> edgeps.commands.serve (commands 8 > runtime 5)",
    ]
    assert commands_importers(host) == ["runtime/job.py -> edgeps.commands.serve"]
    assert lab_importers(host) == ["runtime/__init__.py -> edgeps.lab.bench"]
    assert package_cycles(host) == [
        ["commands", "runtime", "commands"],
        ["runtime", "lab", "core", "runtime"],
    ]


if __name__ == "__main__":
    # python tests/test_layering.py [HOST]: list the arrows of another tree
    host = Path(sys.argv[1]) if len(sys.argv) > 1 else HOST
    for line in upward_arrows(host) + commands_importers(host) + lab_importers(host):
        print(line)
    for cycle in package_cycles(host):
        print(" -> ".join(cycle))
