"""The package's layers, read from its source: no import cycles, no reach across layers.

Layer 1 (``_session``) is the only code that talks to the wire; recipes
(layer 2) use what ``aiocoord._session`` exports, never its modules; the test
kit may also use the wire modules to act as a second client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "aiocoord"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """Every aiocoord module ``name`` imports (also under TYPE_CHECKING)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("aiocoord"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("aiocoord"):
                continue
            # ``from . import _zk`` imports the submodule, not the package's __init__.
            subs = {f"{target}.{a.name}" for a in node.names} & MODULES.keys()
            found.update(subs or {target})
    found.discard(name)
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def test_the_scan_sees_the_known_edges() -> None:
    assert "aiocoord._session._engine" in GRAPH["aiocoord._session._client"]
    assert "aiocoord._session" in GRAPH["aiocoord._recipes.locks._mutex"]
    assert "aiocoord._session._zk" in GRAPH["aiocoord._session._engine"]


def test_no_module_imports_one_that_imports_it_back() -> None:
    # Tarjan's strongly connected components: any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def _layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _layer(n) == "_session"))
def test_the_session_layer_imports_nothing_above_it(name: str) -> None:
    above = {m for m in GRAPH[name] if _layer(m) in {"_recipes", "testing", ""}}
    assert above == set()


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _layer(n) == "_recipes"))
def test_recipes_use_only_what_the_session_package_exports(name: str) -> None:
    reach = {m for m in GRAPH[name] if m.startswith("aiocoord._session.")}
    assert reach == set()
    assert not {m for m in GRAPH[name] if _layer(m) in {"testing", ""}}


def _family(name: str) -> str | None:
    """The recipe family (``locks``, ``_kit``, ...) a module belongs to, if any."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "_recipes" else None


FAMILIES = sorted({f for n in MODULES if (f := _family(n)) is not None and f != "_kit"})

# A family may lean on another only where the recipe is built from it, as
# Curator's counters fall back to its mutex (PromotedToLock).
_FAMILY_MAY_USE = {"counters": {"locks"}}


def test_the_scan_sees_every_family() -> None:
    assert {"locks", "counters", "queues", "leaders", "barriers", "caches", "groups"} <= set(
        FAMILIES
    )


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _family(n) not in {None, "_kit"}))
def test_a_family_uses_only_the_kit_and_the_session(name: str) -> None:
    own = _family(name)
    allowed = {"_kit", own} | _FAMILY_MAY_USE.get(own or "", set())
    reach = {m for m in GRAPH[name] if _family(m) is not None and _family(m) not in allowed}
    assert reach == set()


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _family(n) == "_kit"))
def test_the_kit_uses_no_family(name: str) -> None:
    assert {m for m in GRAPH[name] if _family(m) not in {None, "_kit"}} == set()


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _layer(n) == "testing"))
def test_the_test_kit_reaches_only_the_wire_modules(name: str) -> None:
    allowed = {"aiocoord._session._zk", "aiocoord._session._connection"}
    reach = {m for m in GRAPH[name] if m.startswith("aiocoord._session.")}
    assert reach <= allowed


_NAMEDTUPLE_API = {"_make", "_replace", "_asdict", "_fields"}


def _own_private_names(tree: ast.Module) -> set[str]:
    """Private names this module defines: functions, class members, attributes it sets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return {n for n in names if n.startswith("_")}


def test_no_module_reads_another_modules_private_attributes() -> None:
    """``obj._name`` only for a ``_name`` the same module defines."""
    offenders = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        own = _own_private_names(tree) | _NAMEDTUPLE_API
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in own
            ):
                offenders.append(f"{name}: .{node.attr}")
    assert offenders == []
