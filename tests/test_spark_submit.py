"""The environment's ``spark-submit`` (``scripts/spark-submit``, installed by ``scripts/ensure-env.sh``)
runs without an activated environment: no venv on PATH, no SPARK_HOME, no PYSPARK_PYTHON."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the environment the tests run in: .venv/bin


def outside_the_environment(venv_bin: Path) -> dict[str, str]:
    """The environment of a shell that never activated ``venv_bin``'s environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYSPARK_GATEWAY_PORT",
                        "PYSPARK_GATEWAY_SECRET", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != venv_bin.resolve()]
    env["PATH"] = os.pathsep.join(path or ["/usr/bin", "/bin"])
    return env


@pytest.mark.spark  # starts a JVM of its own
def test_the_environments_spark_submit_runs_without_activation() -> None:
    import pyspark

    done = subprocess.run([str(BIN / "spark-submit"), "--version"], capture_output=True, text=True, timeout=300,
                          env=outside_the_environment(BIN), cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"version {pyspark.__version__}" in done.stdout + done.stderr


def _fresh_venv(root: Path) -> Path:
    """An environment as pip leaves it: this one's interpreter and packages, and pyspark's own
    ``bin/spark-submit`` (which needs the environment activated)."""
    import pyspark

    prefix = Path(sys.prefix)
    (root / "bin").mkdir(parents=True)
    shutil.copy(prefix / "pyvenv.cfg", root / "pyvenv.cfg")
    (root / "lib").symlink_to(prefix / "lib")
    (root / "bin" / "python").symlink_to(sys.executable)
    (root / "bin" / "txn-audit").symlink_to(BIN / "txn-audit")
    spark = Path(pyspark.__file__).parent
    for name in ("spark-submit", "find-spark-home"):
        shutil.copy(spark / "bin" / name, root / "bin" / name)
    shutil.copy(spark / "find_spark_home.py", root / "bin" / "find_spark_home.py")
    (root / ".txn-audit-installed").touch()  # built after pyproject.toml changed: healthy
    return root


@pytest.mark.live
def test_ensure_env_makes_a_fresh_environments_spark_submit_work(tmp_path: Path) -> None:
    venv = _fresh_venv(tmp_path / "venv")
    outside = outside_the_environment(venv / "bin")
    before = subprocess.run([str(venv / "bin" / "spark-submit"), "--version"], capture_output=True, text=True,
                            timeout=300, env=outside, cwd="/")
    if before.returncode == 0:  # a python3 on PATH that has pyspark: the failure cannot be shown here
        assert "version" in before.stdout + before.stderr
    # PIP_NO_INDEX: were the environment found broken, rebuilding it fails at once instead of downloading
    ensured = subprocess.run([str(REPO / "scripts" / "ensure-env.sh")], capture_output=True, text=True, timeout=300,
                             cwd=REPO, env=os.environ | {"VENV": str(venv), "PYTHON": sys.executable,
                                                         "PIP_NO_INDEX": "1"})
    assert ensured.returncode == 0, ensured.stderr
    assert (venv / "bin" / "spark-submit").read_bytes() == (REPO / "scripts" / "spark-submit").read_bytes()
    after = subprocess.run([str(venv / "bin" / "spark-submit"), "--version"], capture_output=True, text=True,
                           timeout=300, env=outside, cwd="/")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "version" in after.stdout + after.stderr
