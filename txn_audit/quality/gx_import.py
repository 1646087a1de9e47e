"""Importing Great Expectations: the one place that imports it first, for the suites, the
expectations a check builds and a scan's early import (``import_great_expectations``)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence

__all__ = ["DEFERRED_MODULES", "import_great_expectations"]

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
