"""The layering: the decoders and the shared modules import without pyspark, imports go one way
and close no cycle."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "txn_audit"


_BLOCKED_IMPORT = """
import importlib, json, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked in this test")
        return None

sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules), "pyspark imported"
print(json.dumps(sorted(m for m in sys.modules if m.startswith("txn_audit"))))
"""


def loaded_without_pyspark(modules: list[str]) -> list[str]:
    """Import ``modules`` in a fresh interpreter in which pyspark cannot be imported; the
    txn_audit modules that got loaded (the test fails if any import fails)."""
    done = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT, *modules], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_formats_import_without_pyspark() -> None:
    names = [f"txn_audit.formats.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE / "formats")])]
    assert len(names) >= 8  # every decoder module is imported
    assert set(names) <= set(loaded_without_pyspark(names))


def test_shared_modules_import_neither_the_stages_nor_pyspark() -> None:
    """The manifest and the tasks' pure helpers need no pyspark; nothing shared imports
    reconstruct, detect or quality, and quality's replica order does not import reconstruct."""
    loaded = loaded_without_pyspark(["txn_audit.manifest", "txn_audit.ledger", "txn_audit.replica_tasks.reading",
                                     "txn_audit.replica_tasks.commit", "txn_audit.replica_tasks", "txn_audit.tables",
                                     "txn_audit.quality.replica_order"])
    assert [m for m in loaded if m.startswith(("txn_audit.reconstruct", "txn_audit.detect"))] == []


def test_the_tuning_imports_nothing_else_of_the_package_nor_pyspark() -> None:
    """``txn_audit.tuning`` holds settings and the mechanisms that apply them: its modules import
    no other part of txn_audit and no pyspark at import time. Its package imports none of its
    modules, so the workers' daemon, which Spark runs by name, loads only itself."""
    names = [f"txn_audit.tuning.{m.name}" for m in pkgutil.iter_modules([str(PACKAGE / "tuning")])]
    assert {"txn_audit.tuning.jvm", "txn_audit.tuning.daemon", "txn_audit.tuning.imports"} <= set(names)
    from txn_audit.tuning.workers import LOCAL_DAEMON_MODULE

    assert LOCAL_DAEMON_MODULE in names  # the name Spark runs the daemon by
    loaded = loaded_without_pyspark(names)
    assert [m for m in loaded if m != "txn_audit" and not m.startswith("txn_audit.tuning")] == []
    assert loaded_without_pyspark(["txn_audit.tuning.daemon"]) == ["txn_audit", "txn_audit.tuning",
                                                                   "txn_audit.tuning.daemon"]


# -- the import graph: one way, no cycles ---------------------------------------------------

#: txn_audit's parts from the bottom up: a part imports only parts of lower layers (and itself),
#: counting imports inside functions too
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"txn_audit", "errors"}),
    frozenset({"tuning"}),
    frozenset({"severity", "timeparse", "outputs", "spark", "progress"}),
    frozenset({"formats"}),
    frozenset({"usage", "audit_time"}),
    frozenset({"schemas", "results"}),
    frozenset({"manifest", "migrate"}),
    frozenset({"ledger"}),
    frozenset({"ingest", "sample", "tables", "replica_tasks"}),
    frozenset({"reconstruct", "stores"}),
    frozenset({"detect"}),
    frozenset({"quality", "report", "warehouse", "fixes"}),
    frozenset({"stages"}),
    frozenset({"explore", "api"}),
    frozenset({"cli", "executor_env"}),  # executor_env imports every module, by name
)


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Module → the package's modules it imports (with the line of the first such import),
    imports inside functions included; importing ``a.b.c`` also imports the packages ``a.b``
    and ``a`` (except the importer's own)."""
    name = package.name
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def resolve(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    graph: dict[str, dict[str, int]] = {module: {} for module in modules}
    for module, path in modules.items():
        own = {".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 2)}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if not (target == name or target.startswith(name + ".")):
                    continue
                found = resolve(target)
                if found is None or found == module:
                    continue
                pieces = found.split(".")
                for k in range(1, len(pieces) + 1):
                    imported = ".".join(pieces[:k])
                    if imported in modules and imported not in own:
                        graph[module].setdefault(imported, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each one an import cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else pieces[0]


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    """No import anywhere in the package, inside a function or not, closes a cycle: a function
    that imports lazily does so to keep a heavy dependency off a path, never to dodge a cycle."""
    assert cycles(import_graph(PACKAGE)) == []


def test_parts_import_downwards_only() -> None:
    layer = {part: depth for depth, parts in enumerate(LAYERS) for part in parts}
    graph = import_graph(PACKAGE)
    assert {_part(m) for m in graph} <= set(layer), "a new part of txn_audit needs its place in LAYERS"
    upward = sorted(f"{m} imports {t} (line {line})" for m, targets in graph.items() for t, line in targets.items()
                    if _part(m) != _part(t) and layer[_part(t)] >= layer[_part(m)])
    assert upward == []


def test_the_graph_check_sees_a_cycle_made_by_a_function_level_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("from pkg.low.leaf import VALUE\n")
    (package / "low" / "leaf.py").write_text("VALUE = 1\n\ndef late():\n    from pkg.high import run\n    return run\n")
    (package / "high.py").write_text("from pkg.low import VALUE\n\ndef run():\n    return VALUE\n")
    assert cycles(import_graph(package)) == [["pkg.high", "pkg.low", "pkg.low.leaf"]]
    (package / "low" / "leaf.py").write_text("VALUE = 1\n")
    assert cycles(import_graph(package)) == []
