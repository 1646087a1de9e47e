"""The Python daemon of txn-audit's local Spark sessions: PySpark's own daemon, started on an
import path without the archives whose modules are installed anyway, its workers freezing
their objects after each task.

Spark puts three archives first on its Python workers' path: ``pyspark.zip`` and the py4j zip
from ``$SPARK_HOME/python/lib``, and the ``spark-core`` jar. Before every task a worker calls
``importlib.invalidate_caches()`` (``pyspark.worker_util.setup_spark_files``), and on Python
3.11 that makes every ``zipimporter`` read its archive's whole directory again: one importer per
archive and per package imported from it, so a worker that has imported PySpark from
``pyspark.zip`` re-reads about 20 directories of 1,300–5,400 entries each, hundreds of
milliseconds of a core per task (CPython gh-103200; Python 3.12 reads them lazily). A scan of a
realistic dump runs a few hundred Python tasks; a profile of one (1 GiB, 66 partitions) found
38 of the workers' 50 CPU seconds there.

In a local session the driver's interpreter is the workers' interpreter, and PySpark and py4j
are installed in it: the archives hold nothing the workers cannot import from the environment
(from compiled files, where the zips hold sources compiled anew by each daemon). This module
takes such archives off the path, then runs ``pyspark.daemon``. An archive that provides a
module found nowhere else stays. ``spark.build_session`` selects it
(``spark.python.daemon.module``: ``workers.LOCAL_DAEMON_MODULE``, this module's name) for the
local sessions it starts, never under spark-submit or on a cluster, whose workers may have
nothing but the archives. Spark runs it by that name (``python -m``), which imports its package
first: ``txn_audit.tuning`` imports none of its modules, so the daemon loads nothing else of
txn-audit.

PySpark's daemon also runs a full garbage collection in a reused worker after each task, over
every object the worker tracks, most of them those of the modules it imported: about 0.15 s
of a core each time once a task has imported pyarrow, numba and txn-audit. Each worker here
collects and freezes its objects after each task instead (``frozen_after_each_task``), so
that the daemon's collection, and the next task's, see only what is new.
"""

from __future__ import annotations

import gc
import sys
import zipfile
from collections.abc import Callable
from importlib.machinery import PathFinder
from typing import Any

__all__ = ["ARCHIVE_SUFFIXES", "archive_modules", "frozen_after_each_task", "redundant_archives", "main"]

#: path entries that are archives Python imports from with ``zipimport``
ARCHIVE_SUFFIXES = (".zip", ".jar", ".egg")


def archive_modules(path: str) -> set[str]:
    """The top-level modules and packages ``path`` (a zip archive) provides to ``import``."""
    names: set[str] = set()
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            first, _, rest = name.partition("/")
            if rest.endswith(("__init__.py", "__init__.pyc")) and "/" not in rest:
                names.add(first)
            elif not rest and first.endswith((".py", ".pyc")):
                names.add(first.rsplit(".", 1)[0])
    return names


def redundant_archives(path: list[str]) -> list[str]:
    """The archives on ``path`` each of whose modules is importable from an entry of ``path``
    that is not an archive (a jar without Python modules is one of them)."""
    others = [entry for entry in path if not entry.endswith(ARCHIVE_SUFFIXES)]
    found: list[str] = []
    for entry in path:
        if not entry.endswith(ARCHIVE_SUFFIXES):
            continue
        try:
            modules = archive_modules(entry)
        except (OSError, zipfile.BadZipFile):
            continue
        if all(PathFinder.find_spec(name, others) is not None for name in modules):
            found.append(entry)
    return found


def frozen_after_each_task(task_main: Callable[..., Any]) -> Callable[..., Any]:
    """``task_main`` (PySpark's worker loop for one task), after which the worker collects its
    garbage and freezes what is left (``gc.freeze``): the objects a task leaves alive, above
    all the modules it imported, are then not traversed by later collections.

    A reused worker's daemon runs a full ``gc.collect()`` after each of its tasks. A worker that
    has imported pyarrow, numba and txn-audit tracks about 170,000 objects, and each of those
    collections takes about 0.15 s of a core: several seconds of a scan's few hundred Python
    tasks, whatever the dump's size. Collected and frozen after each task, each worker pays a
    full collection once; the daemon's own collection then finds little new. Frozen objects
    are still freed when no reference to them is left; only a reference cycle made of them
    once they are unreachable is not collected."""

    def run(*args: Any) -> Any:
        try:
            return task_main(*args)
        finally:
            gc.collect()
            gc.freeze()

    return run


def main() -> None:
    """Drop the redundant archives from the import path, then serve as PySpark's daemon, each
    worker freezing its objects after each task (``frozen_after_each_task``)."""
    dropped = set(redundant_archives(sys.path))
    sys.path[:] = [entry for entry in sys.path if entry not in dropped]
    for key in [key for key in sys.path_importer_cache if key in dropped or key.startswith(
            tuple(f"{entry}/" for entry in dropped))]:
        del sys.path_importer_cache[key]
    from pyspark import daemon

    if callable(getattr(daemon, "worker_main", None)):  # the name the daemon calls each task by
        daemon.worker_main = frozen_after_each_task(daemon.worker_main)
    daemon.manager()  # type: ignore[no-untyped-call]  # pyspark.daemon has no annotations


if __name__ == "__main__":
    main()
