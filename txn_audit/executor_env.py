"""What the Python of a Spark executor must import for txn-audit's tasks, and a check of it.

``python -m txn_audit.executor_env`` imports every module of txn_audit, every runtime dependency
and the modules Spark's Python workers run, then prints one JSON object (``describe``: the
interpreter, its prefix, where each module came from). It exits with 1, naming on stderr each
module that did not import, if any did not. ``scripts/build-executor-env.sh`` runs it on the
environment it packs; ``describe`` run inside a task tells what an executor's Python is.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
from typing import Any

# the import names of the runtime dependencies in pyproject.toml (numba's compiler: llvmlite),
# and the modules a Python worker of Spark runs
DEPENDENCY_MODULES: tuple[str, ...] = (
    "pyspark", "pyspark.daemon", "pyspark.worker", "pyspark.sql.pandas.serializers",
    "great_expectations", "pyarrow", "pyarrow.parquet", "pandas", "numpy", "typer", "rich", "plotly",
    "crc32c", "cramjam", "numba", "llvmlite", "fsspec", "requests",
)


def package_modules() -> list[str]:
    """Every module of the txn_audit package, itself first."""
    import txn_audit

    found = (module.name for module in pkgutil.walk_packages(txn_audit.__path__, "txn_audit."))
    return ["txn_audit", *sorted(found)]


def describe() -> dict[str, Any]:
    """Import every module an executor may need; say where each came from, or why it did not
    import (``missing``), and which interpreter, prefix, folder and search path this is."""
    modules: dict[str, str] = {}
    missing: dict[str, str] = {}
    for name in [*DEPENDENCY_MODULES, *package_modules()]:
        try:
            module = importlib.import_module(name)
        except Exception as err:  # an import that fails for any reason is a missing module here
            missing[name] = f"{type(err).__name__}: {err}"
        else:
            modules[name] = str(getattr(module, "__file__", None) or "")
    return {
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "version": ".".join(map(str, sys.version_info[:3])),
        "cwd": os.getcwd(),
        "path": list(sys.path),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
        "modules": modules,
        "missing": missing,
    }


def main() -> int:
    report = describe()
    print(json.dumps(report, indent=2, sort_keys=True))
    for name, reason in report["missing"].items():
        print(f"error: {name} does not import in {sys.executable}: {reason}", file=sys.stderr)
    return 1 if report["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
