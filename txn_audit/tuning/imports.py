"""Imports that cost a scan time: Great Expectations, imported first in one place with the
modules it never needs deferred (``import_great_expectations``), for the suites, the expectations
a check builds and a scan's early import; and that early import itself, on a thread while the JVM
starts (``import_early``). Each setting, with the measurement behind it, is listed in
``txn_audit.tuning``'s docstring."""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable, Sequence

__all__ = ["DEFERRED_MODULES", "import_early", "import_great_expectations"]

#: modules Great Expectations imports as it loads only for expectations the suites never build
#: (``scipy.stats`` for its distribution tests, ``altair`` for the KL-divergence chart): about
#: 1 s of a core of the 3–5 s its import takes on a small VM. ``import_great_expectations``
#: creates them unexecuted (``importlib.util.LazyLoader``); each runs in full the first time
#: one of its attributes is read, which the suites and Data Docs never do.
DEFERRED_MODULES: tuple[str, ...] = ("scipy.stats", "altair")


class _DeferredModules(importlib.abc.MetaPathFinder):
    """While ``deferring``, finds ``DEFERRED_MODULES`` as the import path does, with loaders
    that run them on first use; any other module, and every module otherwise, is left to the
    other finders. Once on ``sys.meta_path`` it stays there: taking a finder off the list while
    another thread's import walks it could make that import skip the next finder."""

    def __init__(self) -> None:
        self.deferring = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not self.deferring or fullname not in DEFERRED_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.abc.Loader) \
                or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


_DEFERRED = _DeferredModules()


def import_great_expectations() -> None:
    """Import Great Expectations with its usage analytics off (no call out of the machine), with
    ``DEFERRED_MODULES`` left to run on first use: the one place that imports it first, for the
    suites, the expectations a check builds and a scan's early import."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    if "great_expectations" in sys.modules:
        return
    if _DEFERRED not in sys.meta_path:
        sys.meta_path.insert(0, _DEFERRED)
    _DEFERRED.deferring = True
    try:
        import great_expectations  # noqa: F401
    finally:
        _DEFERRED.deferring = False


def import_early(*loads: Callable[[], object]) -> threading.Thread | None:
    """Run ``loads``, each of which imports what a scan needs last (``api._import_early``: Great
    Expectations, the report), one after another on a daemon thread, which it returns; None and
    nothing done without any.

    Great Expectations takes 2–3.5 s of a core to import on a small VM (with the scipy and
    pyspark modules it loads, ``DEFERRED_MODULES`` left to run on first use) and the report's
    plotly about 0.5 s, and they are needed last; a scan starts this before the JVM, whose start
    leaves the Python process waiting, so they are loaded by the time they are needed (an
    ``import`` of a module still loading waits for it to end). The libraries both threads import
    (pyspark's SQL package, pandas, pyarrow) are imported first, on the calling thread, so that
    neither thread waits for a module the other is half-way through. A failed load ends the
    thread's loading and is left for the code that needs the module to meet and report.

    The cyclic garbage collector is off while they load, and what is alive once they are loaded
    is frozen (``gc.freeze``): modules make objects that live as long as the process and almost
    no garbage, yet as their objects grow the collector traverses all of them again and again
    (six full collections, about 1.2 s of a core, while a scan of a small dump imports them);
    frozen, later collections skip them."""
    if not loads:
        return None
    collecting = gc.isenabled()
    gc.disable()
    import pandas  # noqa: F401 - imported for the reason above
    import pyarrow  # noqa: F401
    import pyspark.sql  # noqa: F401

    def load() -> None:
        try:
            for each in loads:
                each()
        except Exception:  # noqa: BLE001 - imported again where needed, which says what failed
            pass
        finally:
            gc.freeze()
            if collecting:
                gc.enable()

    thread = threading.Thread(target=load, name="txn-audit-import-early", daemon=True)
    thread.start()
    return thread
