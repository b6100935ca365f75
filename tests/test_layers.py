"""The shape of the code: no import cycles among modules, no module over 600 lines.

The layer contracts themselves are import-linter's (`lint-imports`, pyproject.toml), run by
`make lint`; its acyclic_siblings contract finds cycles between the packages of each root,
and this test finds them between single modules, across the four roots too (a crowd module
and a tasks module importing each other).
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("crowd", "tasks", "qc", "models")
MAX_LINES = 600
# Not code we write by hand: Alembic's migrations (and its env).
EXEMPT_DIRS = (ROOT / "crowd" / "storage" / "migrations",)
EXEMPT_FILES: set[Path] = set()


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(edges.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(edges):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_strongly_connected_finds_a_cycle_and_nothing_else() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(edges) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    """Every import counts: at module level, inside functions and under TYPE_CHECKING, and
    between a package's __init__ and its modules. Our __init__ modules are docstrings, or
    registries and plugin entries that import their own modules, which never import them
    back; so a cycle through a package's __init__ is a real one and is reported too."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    edges = {
        module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }
    cycles = strongly_connected(edges)
    assert cycles == [], "import cycles (each line a set of modules that import each other):\n" + (
        "\n".join(", ".join(cycle) for cycle in cycles)
    )


# The size rule holds for the tests, benchmarks and examples as well as the packages.
SIZED = (*PACKAGES, "tests", "benchmarks", "examples")


def test_no_module_over_600_lines() -> None:
    offenders = []
    for package in SIZED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path in EXEMPT_FILES or any(path.is_relative_to(d) for d in EXEMPT_DIRS):
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                offenders.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert offenders == [], f"split these by concern (at most {MAX_LINES} lines):\n" + (
        "\n".join(offenders)
    )
