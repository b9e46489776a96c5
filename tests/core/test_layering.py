"""The layering rules, checked on the source: the core imports no policy, runtime
or transport module, and no package resolves internal modules by name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HOST = Path(__file__).resolve().parents[2] / "host" / "edgeps"
CORE_MAY_NOT_IMPORT = (
    "edgeps.policy",
    "edgeps.runtime",
    "edgeps.transport",
    "edgeps.commands",
    "edgeps.sim",
    "paho",
    "socket",
    "threading",
    "time",
)


def imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` statement names, anywhere."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in CORE_MAY_NOT_IMPORT)


CORE_MODULES = sorted((HOST / "core").glob("*.py"))


def test_the_core_has_modules_to_check() -> None:
    assert {p.name for p in CORE_MODULES} >= {"server.py", "types.py", "view.py"}


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: p.name)
def test_a_core_module_imports_no_policy_runtime_or_transport(path: Path) -> None:
    bad = sorted(n for n in imported_modules(path) if forbidden(n))
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    # the oracle above must be able to fail: feed it a module that breaks the rule
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from edgeps.policy import parse_policy\n")
    assert sorted(n for n in imported_modules(mod) if forbidden(n)) == [
        "edgeps.policy",
        "edgeps.policy.parse_policy",
    ]


def lazy_tricks(path: Path) -> list[str]:
    """Module-level ``__getattr__`` definitions and ``importlib.import_module``."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            found.append("__getattr__")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name == "importlib" for a in node.names
        ):
            found.append("importlib")
        elif isinstance(node, ast.ImportFrom) and node.module == "importlib":
            found.extend("importlib" for a in node.names if a.name == "import_module")
    return found


# command tables: a subcommand's module is imported by its name when it is run
TABLES = {Path("cli.py"), Path("commands/bench.py")}


def test_the_trick_finder_sees_a_lazy_package(tmp_path: Path) -> None:
    mod = tmp_path / "__init__.py"
    mod.write_text("import importlib\n\ndef __getattr__(name):\n    return name\n")
    assert lazy_tricks(mod) == ["__getattr__", "importlib"]


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(HOST.rglob("*.py")) if p.relative_to(HOST) not in TABLES],
    ids=lambda p: str(p.relative_to(HOST)),
)
def test_no_module_loads_internal_modules_by_name(path: Path) -> None:
    assert lazy_tricks(path) == []
