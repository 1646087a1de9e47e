"""The real-broker harness end to end: fetch the newest Kafka 4.x release, run one short
scenario on a live broker, and check the scan of what it left against what that broker said.

This is the test that keeps ``make kafka-corpus`` working on a fresh machine: it needs Maven and
a JDK (``make test`` installs them, see ``scripts/ensure-kafka-tools.sh``) and Maven Central.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tools.realkafka.__main__ import DEFAULT_VERSIONS, run_scenario
from tools.realkafka.scenarios import SCENARIOS

pytestmark = [pytest.mark.live]

NEWEST = DEFAULT_VERSIONS[-1]
ONE_MINUTE = 60_000


def _tools_present() -> None:
    missing = [b for b in ("mvn", "javac") if shutil.which(b) is None]
    if missing:
        message = f"the real-broker harness needs {' and '.join(missing)} (make test installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _tools_present()
    out = tmp_path_factory.mktemp("corpus")
    return run_scenario(NEWEST, SCENARIOS["crashed-producer"], out, tmp_path_factory.mktemp("work"))


def test_the_harness_wrote_a_scenario_folder(live: Path) -> None:
    expected = json.loads((live / "expected.json").read_text())
    assert expected["kafka_version"] == NEWEST and expected["transaction_version"] == 2
    assert (live / "logdirs" / "meta.properties").is_file()
    assert (live / "logdirs" / ".kafka_cleanshutdown").exists()
    assert {c["file"] for c in expected["tool_commands"]} >= {
        "tools/offsets.json", "tools/kafka-transactions-list.txt", "tools/kafka-transactions-find-hanging.txt"}
    # the broker saw the crashed producer's transaction open: LSO held below the HW on crash-0/1
    for p in (0, 1):
        offsets = expected["partitions"][f"crash-{p}"]
        assert offsets["last_stable_offset"] < offsets["high_watermark"]
    assert expected["transactional_ids"]["crash-txn"]["state"] == "Ongoing"
    assert (live / "tools" / "dump-log" / "crash-0.txt").read_text().count("Dumping logdirs/crash-0/") >= 1


def test_scan_agrees_with_the_live_broker(spark: Any, live: Path) -> None:
    from txn_audit import api

    expected = json.loads((live / "expected.json").read_text())
    as_of = expected["find_hanging"]["at_ms"]
    result = api.scan(live / "logdirs", spark=spark, options=api.AuditOptions(as_of_ms=as_of, max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, report=False))
    ours = {f"{p.topic}-{p.partition}": p for p in result.partitions}
    for name, broker in expected["partitions_after_find_hanging_wait"].items():
        got = tuple(getattr(ours[name], k) for k in ("high_watermark", "last_stable_offset", "log_start_offset"))
        assert got == (broker["high_watermark"], broker["last_stable_offset"], broker["log_start_offset"]), name
    hanging = {(f.topic, f.partition, f.producer_id, f.first_offset)
               for f in result.findings if f.kind == "hanging_transaction"}
    assert hanging == {(r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["StartOffset"]))
                       for r in expected["find_hanging"]["rows"]}
    opened = {(f.topic, f.partition, f.transactional_id) for f in result.findings
              if f.kind == "open_transaction"}
    assert opened == {("crash", 0, "crash-txn"), ("crash", 1, "crash-txn")}

    text = api.scan(live / "tools", spark=spark, options=api.AuditOptions(as_of_ms=as_of, max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, report=False, input_kind="text"))
    assert {(p.topic, p.partition, p.last_stable_offset) for p in text.partitions} == {
        (p.topic, p.partition, p.last_stable_offset) for p in result.partitions}
