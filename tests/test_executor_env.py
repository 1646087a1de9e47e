"""``txn_audit.executor_env``: the check ``scripts/build-executor-env.sh`` runs on the environment
it packs for executors (the packed archive itself is tested live, in tests/jobs/test_nightly.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from txn_audit.executor_env import DEPENDENCY_MODULES, package_modules

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

_BLOCKED = """
import runpy, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "cramjam" or name.startswith("cramjam."):
            raise ModuleNotFoundError("No module named 'cramjam'")
        return None

sys.meta_path.insert(0, Block())
runpy.run_module("txn_audit.executor_env", run_name="__main__")
"""


def test_every_runtime_dependency_is_imported_by_the_check() -> None:
    requirements = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    import_names = {re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].replace("-", "_").lower()
                    for requirement in requirements}
    assert "great_expectations" in import_names
    assert import_names <= set(DEPENDENCY_MODULES)


def test_the_check_imports_every_module_of_the_package() -> None:
    modules = package_modules()
    assert modules[0] == "txn_audit"
    for name in ("txn_audit.api", "txn_audit.formats.compression", "txn_audit.ingest.worker",
                 "txn_audit.tuning.daemon", "txn_audit.executor_env"):
        assert name in modules


def test_this_environment_passes_the_check(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "txn_audit.executor_env"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["missing"] == {}
    assert set(report["modules"]) == {*DEPENDENCY_MODULES, *package_modules()}
    assert report["executable"] == sys.executable and report["cwd"] == str(tmp_path)


def test_a_dependency_that_does_not_import_fails_the_check(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _BLOCKED], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-4000:]
    missing = json.loads(done.stdout)["missing"]
    assert missing["cramjam"] == "ModuleNotFoundError: No module named 'cramjam'"
    assert "txn_audit.formats.compression" in missing  # and the modules that need it
    assert "txn_audit.severity" not in missing
    assert f"error: cramjam does not import in {sys.executable}" in done.stderr
