"""Hypothesis profiles of the fuzz suite, chosen with ``TXN_AUDIT_FUZZ_PROFILE``.

``ci`` (the default, part of ``make test``): few examples per test, derandomized so that every
run tries the same inputs. ``long``: many more, random each run. Neither writes an example
database into the repository. The profiles are applied per test (``FUZZ``), not loaded
globally, so the rest of the suite keeps hypothesis' defaults.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("txn-audit-fuzz-ci", max_examples=20, derandomize=True, **_COMMON)
settings.register_profile("txn-audit-fuzz-long", max_examples=2000, **_COMMON)

PROFILE = os.environ.get("TXN_AUDIT_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"TXN_AUDIT_FUZZ_PROFILE must be ci or long, got {PROFILE!r}")
FUZZ = settings.get_profile(f"txn-audit-fuzz-{PROFILE}")
