"""The dependency rule of docs/internals.md: imports between kstreams' units go down the layers,
never up, and no units import each other in a circle.

A unit is a top-level module or package of kstreams (``kstreams.state``, ``kstreams.errors``); the
runtime's sub-packages (``threads``, ``tasks``, ...) and ``streams_runtime`` are units of their own,
and the rest of ``kstreams.runtime`` (``client_state``, ``retry``) is the unit ``runtime``. Every
import counts: at module level, inside functions, and under ``TYPE_CHECKING``, since each is an
arrow a reader must follow. The compiled core's sources (``csrc/kstreams/**/*.pyx|pxd|pxi``) and
stubs (``kstreams/_native/*.pyi``) belong to ``_native``. Circles inside one unit are allowed (the
DSL's KStream and KTable modules use each other, as Kafka's KStreamImpl and KTableImpl do).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kstreams"

# The sub-packages (and wiring modules) of kstreams.runtime that are units of their own, lowest
# first: the runtime's own layers (kstreams/runtime/__init__.py).
RUNTIME_UNITS = (
    "internal_topics",
    "tasks",
    "restoration",
    "assignment",
    "queries",
    "threads",
    "client_parts",
    "streams_runtime",
)

# The layers, lowest first (docs/internals.md, "Packages and their contracts"). A unit may import
# only units of lower layers; units of one layer are independent of each other. The runtime's
# sub-packages are layers of their own, in the order of kstreams/runtime/__init__.py's map.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("window",),  # Window: a leaf the compiled WindowedKey makes
    ("_native",),  # the compiled core
    ("processor",),  # the Processor API's types and interfaces
    ("errors",),  # exceptions and handlers (their contexts carry the API's TaskId, RecordMetadata)
    ("cluster",),  # the port and its adapters
    ("config_catalog",),
    ("config",),
    ("metrics",),
    ("serdes",),
    ("predicates", "queries", "init_parameters"),  # public vocabulary: leaves above cluster
    ("state",),
    ("topology",),
    ("processing",),  # the engine: StreamTask, contexts, compiled segments
    ("runtime",),  # client_state, retry
    *((f"runtime.{name}",) for name in RUNTIME_UNITS),
    ("client",),
    ("testing", "spark", "tools"),
    ("kstreams",),  # kstreams/__init__.py: the public surface
    ("cli",),
)
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}
RUNTIME_LAYER = frozenset(f"runtime.{name}" for name in RUNTIME_UNITS)

# An import in a compiled source or stub: `from kstreams.x import y`, `import kstreams.x`, `cimport`.
_NATIVE_IMPORT = re.compile(
    r"^\s*(?:from\s+(kstreams(?:\.\w+)*)\s+c?import|c?import\s+(kstreams(?:\.\w+)*))", re.M
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "kstreams"
    if parts[1] == "runtime" and len(parts) > 2 and parts[2] in RUNTIME_UNITS:
        return f"runtime.{parts[2]}"
    return parts[1]


def imported_modules(path: Path, text: str | None = None) -> Iterator[str]:
    """Every kstreams module ``path`` (whose source is ``text``, or the file's) imports, wherever
    the import statement is."""
    text = path.read_text() if text is None else text
    if path.suffix != ".py":
        for match in _NATIVE_IMPORT.finditer(text):
            yield match.group(1) or match.group(2)
        return
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "kstreams")
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, target] if target else base)
            if target.split(".")[0] == "kstreams":
                # `from kstreams import state` imports the unit state, not only the package's __init__.
                yield from (f"{target}.{alias.name}" for alias in node.names)


def sources() -> Iterable[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))
    yield from sorted((PACKAGE / "_native").glob("*.pyi"))
    for suffix in ("pyx", "pxd", "pxi"):
        yield from sorted((ROOT / "csrc" / "kstreams").rglob(f"*.{suffix}"))


def unit_of_source(path: Path) -> str:
    if path.suffix in (".pyx", ".pxd", ".pxi", ".pyi"):
        return "_native"
    return unit_of(module_name(path))


def unit_arrows() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the imports that make the arrow, as "module -> module"."""
    known_units = {unit_of_source(path) for path in sources()}
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sources():
        source = unit_of_source(path)
        for target in imported_modules(path):
            imported = unit_of(target)
            if imported not in known_units:  # `from kstreams import X` of a name, not a unit
                imported = "kstreams"
            if imported != source:
                arrows[(source, imported)].append(f"{path.relative_to(ROOT)} -> {target}")
    return arrows


def circles(arrows: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in arrows:
        graph[source].add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in sorted(graph[unit]):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return found


def test_every_unit_has_a_layer() -> None:
    units = {unit_of_source(path) for path in sources()}
    assert sorted(units - RANK.keys()) == [], (
        "place each new package or module in LAYERS (and docs/internals.md)"
    )
    assert sorted(RANK.keys() - units) == [], "LAYERS names units that no longer exist"


def test_no_import_goes_up_the_layers() -> None:
    upward = {
        f"{source} -> {target}": where[:3]
        for (source, target), where in unit_arrows().items()
        if RANK[target] > RANK[source]
        or (RANK[target] == RANK[source] and not {source, target} <= RUNTIME_LAYER)
    }
    assert upward == {}


def test_no_circle_among_units_outside_the_runtime() -> None:
    arrows = [arrow for arrow in unit_arrows() if not set(arrow) <= RUNTIME_LAYER]
    assert circles(arrows) == []


def test_no_circle_among_runtime_units() -> None:
    arrows = [arrow for arrow in unit_arrows() if set(arrow) <= RUNTIME_LAYER]
    assert circles(arrows) == []


def test_the_rule_sees_imports_in_functions_and_under_type_checking() -> None:
    """The parser counts the imports a reader must follow, not only those at module level."""
    module = PACKAGE / "state" / "stores.py"
    assert "kstreams.state.builders.KeyValueStoreBuilder" in set(imported_modules(module))
    code = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kstreams.client import KafkaStreams\n"
    )
    code += "def f():\n    import kstreams.runtime.threads\n"
    found = set(imported_modules(PACKAGE / "state" / "probe.py", code))
    assert found == {"kstreams.client.KafkaStreams", "kstreams.runtime.threads"}
    cython = "def window(self):\n    from kstreams.window import Window\ncimport kstreams._native.record\n"
    found = set(imported_modules(ROOT / "csrc" / "kstreams" / "_native" / "probe.pyx", cython))
    assert found == {"kstreams.window", "kstreams._native.record"}
