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


def _import_target(name: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` in module ``name`` reads from."""
    if not node.level:
        return node.module or ""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str) -> set[str]:
    """Every aiocoord module ``name`` imports (also under TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("aiocoord"))
        elif isinstance(node, ast.ImportFrom):
            target = _import_target(name, node)
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
_FAMILY_MAY_USE = {
    "counters": {"locks"},
    # A service cache is a ChildrenCache of the service's node, read as instances.
    "discovery": {"caches"},
}


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


KIT = "aiocoord._recipes._kit"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _family(n) not in {None, "_kit"}))
def test_a_family_reaches_the_kit_only_through_its_face(name: str) -> None:
    """``from .._kit import X``: the kit's ``__init__`` says what families may use."""
    assert {m for m in GRAPH[name] if m.startswith(KIT + ".")} == set()


def test_the_kit_face_exports_only_its_own_modules_names() -> None:
    face = ast.parse(MODULES[KIT].read_text())
    defined = [
        node.name
        for node in face.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    assert defined == []  # a face re-exports; the pieces live in the kit's modules
    assert GRAPH[KIT] <= {m for m in MODULES if m.startswith(KIT + ".")}


LAYERS = {"_session", "_recipes", "testing", "_cli"}
BASE_MODULES = sorted(
    n for n in MODULES if n.count(".") == 1 and _layer(n) not in LAYERS | {"__main__"}
)
"""The top-level private modules (errors, types, paths, checks, telemetry, processes):
what every layer may use, so they use no layer."""


def test_the_scan_sees_the_base_modules() -> None:
    assert {"aiocoord._exceptions", "aiocoord._types", "aiocoord._paths"} <= set(BASE_MODULES)


@pytest.mark.parametrize("name", BASE_MODULES)
def test_a_base_module_imports_no_layer(name: str) -> None:
    assert {m for m in GRAPH[name] if _layer(m) in LAYERS | {""}} == set()


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _layer(n) == "_cli"))
def test_the_command_line_uses_the_public_api(name: str) -> None:
    """Layer 4: ``aiocoord`` and ``aiocoord.testing`` as a user has them (and the
    base modules' process helper), never a layer's private modules."""
    allowed = {"aiocoord", "aiocoord.testing", "aiocoord._process"}
    reach = {m for m in GRAPH[name] if _layer(m) != "_cli" and m not in allowed}
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_names() -> None:
    """``from .x import _name`` only for a submodule; a name another module
    needs gets a name without the underscore (and a place both can use)."""
    offenders = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _import_target(name, node)
            if not target.startswith("aiocoord"):
                continue
            for alias in node.names:
                if _is_private(alias.name) and f"{target}.{alias.name}" not in MODULES:
                    offenders.append(f"{name}: {alias.name} from {target}")
    assert offenders == []


class _ClassInfo:
    """A class as this test reads it: its bases and the private members it declares."""

    def __init__(self, module: str, node: ast.ClassDef, imported: dict[str, str]) -> None:
        self.module = module
        self.name = node.name
        self.bases: list[tuple[str, str]] = []
        """(module, class name) of each base this module names."""
        for base in node.bases:
            if isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                self.bases.append((imported.get(base.id, module), base.id))
        self.is_protocol = any(name == "Protocol" for _, name in self.bases)
        self.declared: set[str] = set()
        """Private members: methods, class attributes, and ``self._x`` it assigns."""
        self.used: set[str] = set()
        """Private members it reads or writes on ``self``."""
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                self.declared.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                self.declared.add(item.target.id)
            elif isinstance(item, ast.Assign):
                self.declared.update(t.id for t in item.targets if isinstance(t, ast.Name))
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
            ):
                self.used.add(sub.attr)
                if isinstance(sub.ctx, ast.Store):
                    self.declared.add(sub.attr)
        self.declared = {n for n in self.declared if _is_private(n)}
        self.used = {n for n in self.used if _is_private(n)}


def _classes() -> list[_ClassInfo]:
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    imported[alias.asname or alias.name] = target
        found.extend(
            _ClassInfo(name, node, imported)
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
        )
    return found


CLASSES = _classes()


def test_the_class_scan_sees_private_members() -> None:
    (contender,) = [c for c in CLASSES if c.name == "Contender"]
    assert {"_wait_turn", "_client"} <= contender.declared


def test_no_protocol_names_another_modules_private_members() -> None:
    """A Protocol is matched by shape: one that declares ``_name`` lets its module
    call a private member of whatever class in another module fits it."""
    offenders = []
    for protocol in (c for c in CLASSES if c.is_protocol):
        for other in CLASSES:
            shared = protocol.declared & other.declared
            if other.module != protocol.module and not other.is_protocol and shared:
                offenders.append(
                    f"{protocol.module}.{protocol.name}: {sorted(shared)} of {other.name}"
                )
    assert offenders == []


def test_no_class_reaches_the_private_members_of_a_base_in_another_module() -> None:
    """Overriding or using an inherited ``_name`` across modules is reading another
    module's private members: the base offers such members without the underscore."""
    by_name = {(c.module, c.name): c for c in CLASSES}
    offenders = []
    for cls in CLASSES:
        for key in cls.bases:
            base = by_name.get(key)
            if base is None or base.module == cls.module:
                continue
            shared = base.declared & (cls.declared | cls.used)
            if shared:
                offenders.append(f"{cls.module}.{cls.name}: {sorted(shared)} of {base.name}")
    assert offenders == []
