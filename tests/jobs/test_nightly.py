"""The nightly job through pyspark's own ``spark-submit`` (local mode and a standalone cluster
on 127.0.0.1) and the warehouse it appends to."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from txn_audit import warehouse as wh_module
from txn_audit.api import scan_exit_code
from txn_audit.severity import Severity
from txn_audit.usage import ExitCode
from txn_audit.errors import OutputError, UsageError
from txn_audit.outputs import FIXES_SCRIPT
from txn_audit.schemas import ALL_TABLES, FINDINGS, read_ms
from txn_audit.warehouse import (
    PARTITION_COLUMN, RUNS, audit_dates, partition_name, publish_run, resolve,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import SampleScan

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "nightly_audit.py"
PROBE = Path(__file__).resolve().parent / "executor_probe.py"
BUILD_EXECUTOR_ENV = REPO / "scripts" / "build-executor-env.sh"
EXECUTOR_ENV = REPO / "dist" / "txn-audit-executor-env.tar.gz"
BUILD_TIMEOUT_S = 1800
AUDIT_DATE = date(2026, 11, 20)
PART = partition_name(AUDIT_DATE)
SUBMIT_TIMEOUT_S = 900
# short-lived JVMs on a small dump: the quick JIT tier and the serial GC spend far less CPU warming up
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "TXN_AUDIT_SPARK_MASTER", "SPARK_CONF_DIR")}
    (tmp / "local").mkdir(parents=True, exist_ok=True)
    return env | {
        "SPARK_HOME": str(_spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
    }


@dataclass
class Run:
    code: int
    output: str

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _start(cmd: list[str], log: Path, env: dict[str, str], cwd: Path = REPO) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a process and everything it started (its process group)."""
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
    try:  # executors and Python workers may outlive the process that started them
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _submit(master: str, dump: Path, warehouse: str, tmp: Path, *extra: str,
            options: tuple[str, ...] = (), app: tuple[str, ...] = (str(JOB),)) -> Run:
    """``spark-submit jobs/nightly_audit.py`` with a lean JVM; its whole output is returned.
    ``options`` go to spark-submit, ``app`` replaces the job's path (another entry point and its
    own arguments), ``extra`` follows the job's options."""
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "spark-submit.log"
    cmd = [
        str(_spark_home() / "bin" / "spark-submit"), "--master", master, "--driver-memory", "1g",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.executor.memory=1g", "--conf", f"spark.local.dir={tmp / 'local'}",
        "--conf", f"spark.driver.extraJavaOptions={LEAN_JVM}", "--conf", f"spark.executor.extraJavaOptions={LEAN_JVM}",
        *options, *app, "--dump", str(dump), "--warehouse", warehouse, "--audit-date", AUDIT_DATE.isoformat(), *extra,
    ]
    proc = _start(cmd, log, _env(tmp))
    try:
        code = proc.wait(SUBMIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
        pytest.fail(f"spark-submit did not finish in {SUBMIT_TIMEOUT_S} s:\n{log.read_text()[-6000:]}")
    finally:
        _stop(proc)
    return Run(code, log.read_text(errors="replace"))


def _assert_fixes_filled(script: Path) -> None:
    """The date's ``fixes.sh``: valid shell, every command naming the cluster and the client
    config the job was given, none of them run unless the operator uncomments it."""
    text = script.read_text()
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, text
    commands = [line.lstrip("# ") for line in text.splitlines() if line.lstrip("# ").startswith("kafka-")]
    assert commands, text  # the sample has hanging transactions: there is something to fix
    for command in commands:
        words = shlex.split(command)
        assert "--bootstrap-server" in words and words[words.index("--bootstrap-server") + 1] == \
            "kafka-1:9092,kafka-2:9092", command
        assert words[words.index("--command-config") + 1] == "/etc/kafka/admin.properties", command
    assert not [line for line in text.splitlines() if line.startswith("kafka-")], "a fix would run by default"


def _rows(folder: Path) -> list[str]:
    """A partition's rows, each as canonical JSON, sorted (row order is not compared here)."""
    files = sorted(p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    return sorted(json.dumps(row, sort_keys=True, default=repr) for row in rows)


def _snapshot(warehouse: Path) -> dict[str, list[str]]:
    return {name: _rows(warehouse / name / PART) for name in ALL_TABLES}


def _finding_key(finding: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(finding[name] for name in FINDINGS.names)


def _assert_layout(warehouse: Path) -> None:
    """One partition folder per table and for the run, and nothing hidden left beside them."""
    assert sorted(p.name for p in warehouse.iterdir()) == sorted([*ALL_TABLES, RUNS])
    for name in [*ALL_TABLES, RUNS]:
        assert sorted(p.name for p in (warehouse / name).iterdir()) == [PART], name


def _assert_findings_match(warehouse: Path, sample: SampleScan) -> None:
    published = [row for f in sorted((warehouse / "findings" / PART).glob("*.parquet"))
                 for row in read_ms(pq.read_table(f)).to_pylist()]  # instants as the rows give them: epoch ms
    assert Counter(map(_finding_key, published)) == Counter(_finding_key(f.to_row()) for f in sample.result.findings)
    run = warehouse / RUNS / PART
    summary = json.loads((run / "summary.json").read_text())
    assert summary["findings"] == sample.result.to_json()["findings"]
    assert (run / "report.html").stat().st_size > 0
    results = json.loads((run / "quality" / "results.json").read_text())
    assert results  # the GX results came along


# -- the executor environment: what executors elsewhere run ---------------------------------


def _build_python() -> str:
    """The interpreter the executor environment is made from: the one this environment was
    made from, so executors run the driver's Python version."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture(scope="session")
def executor_env() -> Path:
    """``dist/txn-audit-executor-env.tar.gz``, built by ``scripts/build-executor-env.sh`` when it
    is missing or older than pyproject.toml or txn_audit/ (a few minutes), else used as it is."""
    env = os.environ | {"VENV": sys.prefix, "PYTHON": _build_python()}
    try:
        done = subprocess.run([str(BUILD_EXECUTOR_ENV), str(EXECUTOR_ENV)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/build-executor-env.sh did not build {EXECUTOR_ENV} in {BUILD_TIMEOUT_S} s")
    if done.returncode != 0 or not EXECUTOR_ENV.is_file():
        pytest.fail(f"scripts/build-executor-env.sh could not build {EXECUTOR_ENV} "
                    f"(exit code {done.returncode}):\n{(done.stdout + done.stderr)[-6000:]}")
    return EXECUTOR_ENV


def _development_paths() -> list[Path]:
    """Where the development side lives: the source tree and the environment running the tests."""
    return [REPO, Path(sys.prefix), Path(sys.prefix).resolve()]


def _is_development(path: str) -> bool:
    return any(Path(path) == dev or dev in Path(path).parents for dev in _development_paths())


def _node_env(root: Path) -> dict[str, str]:
    """What a worker node's processes see: the system's PATH without the development environment,
    no PYTHONPATH and no PYSPARK_PYTHON; Spark from the node's own installation."""
    env = {k: os.environ[k] for k in ("HOME", "USER", "LANG", "LC_ALL", "TZ", "JAVA_HOME") if k in os.environ}
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not _is_development(p))
    (root / "local").mkdir(parents=True, exist_ok=True)
    return env | {"PATH": path, "SPARK_HOME": str(root / "spark"), "SPARK_LOCAL_IP": "127.0.0.1",
                  "SPARK_LOCAL_DIRS": str(root / "local"), "TMPDIR": str(root / "local")}


def _install_spark(dest: Path) -> None:
    """The nodes' Spark: a copy (hard links where the file system allows) of the Spark
    distribution inside the driver's pyspark package, so no daemon runs from the driver's tree."""
    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(_spark_home(), dest, symlinks=True, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__"))


@pytest.mark.live
def test_the_executor_environment_imports_what_executors_need(executor_env: Path, tmp_path: Path) -> None:
    """The packed environment, unpacked elsewhere and run isolated (``-I``, a bare environment,
    from a folder outside the source tree) imports txn_audit and every runtime dependency from
    itself alone."""
    target = tmp_path / "environment"
    target.mkdir()
    subprocess.run(["tar", "-xzf", str(executor_env), "-C", str(target)], check=True, timeout=600)
    assert list(target.glob("lib/python*/site-packages/txn_audit/__init__.py"))
    assert not list(target.glob("lib/python*/site-packages/pyspark/jars/*.jar"))  # the cluster's Spark has them
    done = subprocess.run([str(target / "bin" / "python"), "-I", "-m", "txn_audit.executor_env"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["missing"] == {}
    assert report["prefix"] == str(target)
    assert report["version"] == ".".join(map(str, sys.version_info[:3]))  # the driver's: PySpark insists
    for name, file in report["modules"].items():
        assert Path(file).is_relative_to(target), f"{name} came from {file}, outside the executor environment"
    assert not any(_is_development(entry) for entry in report["path"]), report["path"]


# -- spark-submit, standalone cluster ------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _master_state(ui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            return json.loads(reply.read())
    except (OSError, ValueError):
        return None


@dataclass
class Cluster:
    url: str
    ui_port: int
    worker_dirs: list[Path]


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A master and two one-core workers on 127.0.0.1, as nodes apart from the development side:
    they run a Spark installed for them (``_install_spark``), from their own folder, with an
    environment that names neither the source tree nor the development environment
    (``_node_env``); executors get their Python from the application (``--archives``)."""
    root = tmp_path / "cluster"
    logs = root / "logs"
    logs.mkdir(parents=True)
    _install_spark(root / "spark")
    env = _node_env(root) | {"SPARK_LOG_DIR": str(logs), "SPARK_WORKER_DIR": str(root / "work"),
                             "SPARK_DAEMON_MEMORY": "512m", "SPARK_DAEMON_JAVA_OPTS": LEAN_JVM}
    spark_class = str(root / "spark" / "bin" / "spark-class")
    port, ui_port = _free_port(), _free_port()
    worker_dirs = [root / "work" / f"worker-{i}" for i in (1, 2)]
    procs: list[subprocess.Popen[bytes]] = []

    def fail(reason: str) -> None:
        text = "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}" for log in sorted(logs.iterdir()))
        pytest.fail(f"the standalone cluster did not start: {reason}\n{text}")

    def wait_for(condition: Any, what: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if any(p.poll() is not None for p in procs):
                fail(f"a daemon exited while waiting for {what}")
            if time.monotonic() > deadline:
                fail(f"timed out waiting for {what}")
            time.sleep(1)

    try:
        procs.append(_start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", str(port), "--webui-port", str(ui_port)], logs / "master.out", env, root))
        wait_for(lambda: (_master_state(ui_port) or {}).get("status") == "ALIVE", "the master")
        for i, work in enumerate(worker_dirs, 1):
            work.mkdir(parents=True)
            procs.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                 "--host", "127.0.0.1", "--cores", "1", "--memory", "2g",
                                 "--webui-port", str(_free_port()), "--work-dir", str(work)],
                                logs / f"worker-{i}.out", env, root))
        wait_for(lambda: (_master_state(ui_port) or {}).get("aliveworkers") == 2, "two workers to register")
        yield Cluster(f"spark://127.0.0.1:{port}", ui_port, worker_dirs)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _assert_executors_ran_the_artifact(reports: list[dict[str, Any]], cluster: Cluster) -> None:
    """Each report (one task's ``describe``) shows the Python of the unpacked ``environment``
    in an executor's folder, every module from there or the node's Spark, and nothing of the
    development side; the tasks ran on both workers."""
    assert reports, "the probe ran no task"
    workers = set()
    for report in reports:
        cwd = Path(report["cwd"])
        worker = next((w for w in cluster.worker_dirs if w in cwd.parents), None)
        assert worker is not None, f"a task ran in {cwd}, not in an executor's folder"
        workers.add(worker)
        assert report["missing"] == {}, report["missing"]
        assert Path(report["executable"]) == cwd / "environment" / "bin" / "python"
        assert Path(report["prefix"]) == cwd / "environment"
        assert report["version"] == ".".join(map(str, sys.version_info[:3]))
        assert Path(report["modules"]["txn_audit"]).is_relative_to(cwd / "environment")
        node_spark = cluster.worker_dirs[0].parents[1] / "spark"
        for name, file in report["modules"].items():
            assert Path(file).is_relative_to(cwd / "environment") or Path(file).is_relative_to(node_spark), (name, file)
        searched = [*report["path"], *report["pythonpath"].split(os.pathsep)]
        development = [p for p in searched if p and _is_development(p)]
        assert development == [], development
    assert workers == set(cluster.worker_dirs), "the probe's tasks did not run on both workers"


# -- spark-submit: local mode, then a standalone cluster, for one audit date -------------------


@pytest.mark.live
def test_nightly_job_in_local_mode_then_on_a_cluster_for_one_date(
    spark: SparkSession, sample_scan: SampleScan, executor_env: Path, standalone_cluster: Cluster, tmp_path: Path
) -> None:
    """One spark-submit in local mode, then a rerun of the same date on a standalone cluster
    (given the warehouse as a file:// URI): the date's partitions are replaced, not appended.
    On the cluster the executors run the packed executor environment (``--archives``, its
    ``bin/python`` as ``spark.pyspark.python``), and a probe after the job, in the same
    application, shows they did; the driver runs this environment's Python."""
    warehouse = tmp_path / "warehouse"
    expected = int(scan_exit_code(sample_scan.result, fail_on=Severity.WARNING, strict=False))
    assert expected == ExitCode.CRITICAL  # the sample has critical findings planted on purpose

    first = _submit("local[2]", sample_scan.dump, str(warehouse), tmp_path / "first",
                    "--bootstrap-server", "kafka-1:9092,kafka-2:9092", "--command-config", "/etc/kafka/admin.properties")
    assert first.code == expected, first.tail()
    _assert_fixes_filled(warehouse / RUNS / PART / FIXES_SCRIPT)
    assert "nightly_audit verdict: CRITICAL" in first.output and "exit code 4 (critical)" in first.output
    assert "nightly_audit audit time " in first.output and ": given with --as-of" not in first.output
    _assert_layout(warehouse)
    before = _snapshot(warehouse)
    assert sum(map(len, before.values())) > 0

    probe = tmp_path / "executors.json"
    second = _submit(
        standalone_cluster.url, sample_scan.dump, warehouse.as_uri(), tmp_path / "second",
        options=("--archives", f"{executor_env}#environment", "--conf", "spark.pyspark.python=./environment/bin/python",
                 "--conf", f"spark.pyspark.driver.python={sys.executable}"),
        app=(str(PROBE), str(probe)),
    )
    assert second.code == expected, second.tail()
    state = _master_state(standalone_cluster.ui_port) or {}
    assert len(state.get("completedapps", [])) == 1, state  # the rerun ran on the cluster, not in local mode
    for work in standalone_cluster.worker_dirs:  # and both workers ran an executor for it
        assert list(work.glob("app-*/*/stderr")), f"no executor ran on {work}"
    _assert_executors_ran_the_artifact(json.loads(probe.read_text()), standalone_cluster)
    _assert_layout(warehouse)
    assert _snapshot(warehouse) == before
    _assert_findings_match(warehouse, sample_scan)
    assert audit_dates(warehouse) == [AUDIT_DATE]

    frame = spark.read.parquet(str(warehouse / "findings"))
    assert dict(frame.dtypes)[PARTITION_COLUMN] == "date"
    assert frame.count() == len(sample_scan.result.findings)


# -- the environment's spark-submit, not activated: the job runs and Spark stays quiet ----------


@pytest.mark.spark
def test_the_environments_spark_submit_runs_the_job_quietly_without_activation(tmp_path: Path) -> None:
    """``.venv/bin/spark-submit`` from a shell that never activated the environment (no venv on
    PATH, no SPARK_HOME, no PYSPARK_PYTHON) runs the job with the environment's Python, and the
    job keeps Spark's log lines off its output: only the JVM's start-up notice, printed before the
    job runs, remains."""
    from tests.test_spark_submit import BIN, outside_the_environment

    dump = REPO / "tests" / "corpus" / "kafka-4.4.0" / "healthy" / "logdirs"
    env = outside_the_environment(BIN) | {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp_path)}
    done = subprocess.run(
        [str(BIN / "spark-submit"), "--driver-memory", "1g", "--conf", "spark.ui.enabled=false",
         "--conf", f"spark.driver.extraJavaOptions={LEAN_JVM}", str(JOB), "--dump", str(dump),
         "--warehouse", str(tmp_path / "wh"), "--audit-date", AUDIT_DATE.isoformat()],
        capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S, env=env, cwd=REPO)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "nightly_audit verdict: CLEAN" in output
    marks = (" INFO ", " WARN ", " ERROR ", "log4j", "Setting default log level")
    spark_lines = [line for line in output.splitlines() if any(mark in line for mark in marks)]
    assert spark_lines == []
    assert audit_dates(tmp_path / "wh") == [AUDIT_DATE]


# -- publish_run, in process ---------------------------------------------------------------


def _listing(warehouse: Path) -> dict[str, tuple[int, int]]:
    """Every file under the warehouse with its inode and size."""
    return {str(p.relative_to(warehouse)): (p.stat().st_ino, p.stat().st_size)
            for p in sorted(warehouse.rglob("*")) if p.is_file()}


def _hidden(warehouse: Path) -> list[Path]:
    return [p for name in [*ALL_TABLES, RUNS] if (warehouse / name).is_dir()
            for p in (warehouse / name).iterdir() if p.name.startswith(".")]


@pytest.mark.spark
def test_publish_run_layout_readers_and_rerun(spark: SparkSession, sample_scan: SampleScan, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    other = date(2026, 11, 21)
    first = publish_run(spark, sample_scan.out, warehouse, AUDIT_DATE)
    assert first.tables == {name: warehouse / name / PART for name in ALL_TABLES}
    assert first.run_dir == warehouse / RUNS / PART
    for name, folder in first.tables.items():
        files = sorted(folder.glob("*.parquet"))
        assert files, name
        assert all(PARTITION_COLUMN not in pq.read_schema(f).names for f in files), name
        source = ds.dataset(sample_scan.out / "tables" / name, format="parquet")
        assert first.row_counts[name] == source.count_rows(), name
    assert first.row_counts["findings"] == len(sample_scan.result.findings)
    assert sorted(p.name for p in first.run_dir.iterdir() if not p.name.startswith(".")) == [
        FIXES_SCRIPT, "quality", "report.html", "run.json", "summary.json"]

    publish_run(spark, sample_scan.out, warehouse, other)
    untouched = {k: v for k, v in _listing(warehouse).items() if partition_name(other) in k}
    old_folder = (warehouse / "findings" / PART).stat().st_ino
    old_names = {name: sorted(p.name for p in (warehouse / name / PART).iterdir()) for name in ALL_TABLES}
    before = _snapshot(warehouse)

    again = publish_run(spark, sample_scan.out, f"file://{warehouse}", AUDIT_DATE)
    assert again.row_counts == first.row_counts
    assert (warehouse / "findings" / PART).stat().st_ino != old_folder  # a new partition was swapped in
    assert {name: sorted(p.name for p in (warehouse / name / PART).iterdir()) for name in ALL_TABLES} == old_names
    assert _snapshot(warehouse) == before
    assert {k: v for k, v in _listing(warehouse).items() if partition_name(other) in k} == untouched
    assert _hidden(warehouse) == []
    assert audit_dates(warehouse) == audit_dates(warehouse.as_uri()) == [AUDIT_DATE, other]

    hive = ds.dataset(warehouse / "findings", format="parquet", partitioning="hive").to_table()
    assert hive.num_rows == 2 * len(sample_scan.result.findings)
    assert sorted({str(v) for v in hive.column(PARTITION_COLUMN).to_pylist()}) == ["2026-11-20", "2026-11-21"]
    frame = spark.read.parquet(str(warehouse / "findings"))
    counts = {row[0]: row[1] for row in frame.groupBy(PARTITION_COLUMN).count().collect()}
    assert counts == {AUDIT_DATE: len(sample_scan.result.findings), other: len(sample_scan.result.findings)}


@pytest.mark.spark
def test_a_failed_publish_leaves_whole_partitions(
    sample_scan: SampleScan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the scan's batches in two files, so that a table is published file after file
    scan = tmp_path / "scan"
    shutil.copytree(sample_scan.out, scan)
    folder = scan / "tables" / "batches"
    (written,) = [p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith(("_", "."))]
    rows = pq.read_table(written)
    for index, part in enumerate((rows.slice(0, rows.num_rows // 2), rows.slice(rows.num_rows // 2))):
        pq.write_table(part, folder / f"part-{index:05d}-split.parquet")
    written.unlink()
    warehouse = tmp_path / "wh"
    publish_run(None, scan, warehouse, AUDIT_DATE)
    names = {name: sorted(p.name for p in (warehouse / name / PART).iterdir()) for name in ALL_TABLES}
    before = _snapshot(warehouse)
    # fail on the second file of the first table that has several: after some tables were
    # republished, in the middle of one, before the others
    sizes = [len(names[name]) - 1 for name in ALL_TABLES]  # minus the marker file
    several = next(i for i, n in enumerate(sizes) if n > 1)
    fail_at = sum(sizes[:several]) + 2
    real, calls = wh_module._link_or_copy, []

    def failing(source: Path, dest: Path) -> None:
        calls.append(dest)
        if len(calls) == fail_at:
            raise OSError(28, "No space left on device")
        real(source, dest)

    monkeypatch.setattr(wh_module, "_link_or_copy", failing)
    with pytest.raises(OutputError, match="no space left on device; the previous output is left as it was"):
        publish_run(None, scan, warehouse, AUDIT_DATE)
    assert {name: sorted(p.name for p in (warehouse / name / PART).iterdir()) for name in ALL_TABLES} == names
    assert _snapshot(warehouse) == before
    assert _hidden(warehouse) == []


@pytest.mark.spark
def test_leftovers_of_a_killed_publish_are_ignored_then_cleaned(
    spark: SparkSession, sample_scan: SampleScan, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    publish_run(spark, sample_scan.out, warehouse, AUDIT_DATE)
    findings = len(sample_scan.result.findings)
    # a run killed while building a partition, and one killed between the two renames of a
    # system without an atomic exchange (the old partition moved aside, the new one not yet in)
    staging = warehouse / "findings" / f".{PART}.staging-0123abcd"
    shutil.copytree(warehouse / "findings" / PART, staging)
    moved = warehouse / "batches" / f".{PART}.previous-0123abcd"
    batches = _rows(warehouse / "batches" / PART)
    os.rename(warehouse / "batches" / PART, moved)

    assert spark.read.parquet(str(warehouse / "findings")).count() == findings
    assert ds.dataset(warehouse / "findings", format="parquet", partitioning="hive").count_rows() == findings

    publish_run(spark, sample_scan.out, warehouse, AUDIT_DATE)
    assert _hidden(warehouse) == []
    _assert_layout(warehouse)
    assert _rows(warehouse / "batches" / PART) == batches
    assert spark.read.parquet(str(warehouse / "findings")).count() == findings


def test_data_files_follow_write_order(tmp_path: Path) -> None:
    import pyarrow as pa

    table = tmp_path / "t"
    table.mkdir()
    later, earlier = "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"
    names = [f"part-00001-{earlier}-c000.snappy.parquet", f"part-00000-{earlier}-c000.snappy.parquet",
             f"part-00000-{later}-c000.snappy.parquet"]
    for i, name in enumerate(names):
        pq.write_table(pa.table({"x": [i]}), table / name)
        os.utime(table / name, ns=(10**18 + (2 if later in name else 1), 10**18 + (2 if later in name else 1)))
    (table / "_SUCCESS").write_text("")
    (table / f".{names[0]}.crc").write_text("")
    assert [p.name for p in wh_module._data_files(table)] == [names[1], names[0], names[2]]


def test_locations_and_refusals(tmp_path: Path) -> None:
    assert resolve("file:///data/wh") == Path("/data/wh")
    assert resolve(Path("rel")) == Path("rel").absolute()
    for bad in ("s3://bucket/wh", "hdfs://nn/wh", "file://otherhost/wh"):
        with pytest.raises(UsageError):
            resolve(bad)
    assert audit_dates(tmp_path / "nothing") == []
    incomplete = tmp_path / "scan"
    (incomplete / "tables" / "batches").mkdir(parents=True)
    with pytest.raises(UsageError, match="not a complete scan output"):
        publish_run(None, incomplete, tmp_path / "wh", AUDIT_DATE)


# -- usage errors: exit code 2 and a message, never a traceback ---------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--audit-date", "20261120"], "--audit-date must be a date"),
        (["--audit-date", "2026-02-30"], "--audit-date must be a date"),
        (["--max-transaction-timeout", "15"], "invalid duration"),
        (["--as-of", "yesterday"], "invalid time"),
        (["--min-severity", "loud"], "invalid choice"),
        (["--dump-typo", "x"], "unrecognized arguments"),
        (["--bootstrap-server", "kafka-1"], "expected HOST:PORT"),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    done = subprocess.run([sys.executable, str(JOB), "--dump", str(dump), "--warehouse", str(tmp_path / "wh"), *args],
                          capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "wh").exists()


def test_missing_dump_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(JOB), "--dump", str(tmp_path / "missing"), "--warehouse",
                           str(tmp_path / "wh"), "--audit-date", "2026-11-20"],
                          capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "dump not found" in done.stderr and "Traceback" not in done.stderr


def test_a_crash_is_exit_code_70_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from txn_audit import api

    spec = importlib.util.spec_from_file_location("nightly_audit_job", JOB)
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("executor lost")

    monkeypatch.setattr(api, "run_nightly", crash)
    assert job.main(["--dump", str(tmp_path), "--warehouse", str(tmp_path / "wh"), "--audit-date", "2026-11-20"]) == 70
    assert ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "executor lost" in err
