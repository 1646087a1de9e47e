"""Dumps of several brokers, built from copies of real brokers' log dirs and damaged by hand.

Every value the tests expect comes from Kafka: the live cluster's HW, LSO and leaders
(``expected.json``), and ``kafka-dump-log``'s positions of the batches that the damage cuts or
changes. The damage is what a copy of a cluster meets: a copy cut short, a follower holding a
different batch at an offset, several log dirs per broker, a partition being moved between log
dirs, partitions that only some brokers hold.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from crc32c import crc32c

from tests.kafkacorpus import CORPUS
from tests.realcorpus import REALCORPUS, needs_corpus
from txn_audit.results import Finding, PartitionStatus

pytestmark = [pytest.mark.corpus]

CRASHED = REALCORPUS / "crashed-producer"
REPLICATED = CORPUS / "kafka-4.4.0" / "follower-killed"

_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .*producerEpoch: (\d+) .*position: (\d+) .*size: (\d+)")


def batches_as_dumped(dump_log: Path) -> dict[int, dict[str, int]]:
    """Per base offset, the batch as ``kafka-dump-log`` printed it (first segment file of the dump)."""
    found: dict[int, dict[str, int]] = {}
    for line in dump_log.read_text().splitlines():
        m = _BATCH.match(line)
        if m:
            base, last, epoch, position, size = map(int, m.groups())
            found[base] = {"last": last, "epoch": epoch, "position": position, "size": size}
    return found


def scan(spark: Any, dump: Path, out: Path) -> tuple[Any, list[dict[str, Any]]]:
    from txn_audit import api

    result = api.scan(dump, out, spark=spark, options=api.AuditOptions(progress=False, quality=False, report=True))
    replicas = ds.dataset(str(out / "tables" / "replica_stability")).to_table().to_pylist()
    return result, replicas


def partition(result: Any, topic: str, number: int) -> PartitionStatus:
    (found,) = [p for p in result.partitions if (p.topic, p.partition) == (topic, number)]
    return found


def findings(result: Any, kind: str, topic: str, number: int) -> list[Finding]:
    return [f for f in result.findings if (f.kind, f.topic, f.partition) == (kind, topic, number)]


# -- two copies of a crashed producer's broker, one cut short -----------------------------------


@pytest.fixture(scope="module")
def two_brokers(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict[str, Any]], int]:
    if not CRASHED.is_dir():
        pytest.skip(f"real corpus not found at {REALCORPUS}")
    root = tmp_path_factory.mktemp("two-brokers") / "dump"
    for broker in (1, 2):
        shutil.copytree(CRASHED / "logdirs", root / f"broker-{broker}")
    props = root / "broker-2" / "meta.properties"
    props.write_text(re.sub(r"(?m)^node\.id=1$", "node.id=2", props.read_text()))
    # broker 1's copy of crash-0 ends where kafka-dump-log puts the open transaction's batch
    cut = batches_as_dumped(CRASHED / "tools" / "dump-log" / "crash-0.txt")[60]["position"]
    segment = root / "broker-1" / "crash-0" / "00000000000000000000.log"
    with segment.open("r+b") as f:
        f.truncate(cut)
    # broker 2 holds no copy of crash-2: a partition only some brokers hold
    shutil.rmtree(root / "broker-2" / "crash-2")
    result, replicas = scan(spark, root, root.parent / "out")
    return result, replicas, cut


@needs_corpus
def test_the_intact_copy_speaks_and_gives_the_brokers_lso(two_brokers: tuple[Any, Any, int]) -> None:
    result, _, _ = two_brokers
    live = json.loads((CRASHED / "expected.json").read_text())["partitions"]
    p = partition(result, "crash", 0)
    assert (p.high_watermark, p.last_stable_offset) == (live["crash-0"]["high_watermark"],
                                                             live["crash-0"]["last_stable_offset"])
    assert (p.broker_id, p.replicas, p.open_transactions) == (2, 2, 1)
    assert p.held_records == live["crash-0"]["high_watermark"] - live["crash-0"]["last_stable_offset"]
    assert "cut short" in p.replica_choice_reason and p.chosen_replica == "broker 2 (broker-2)"
    assert findings(result, "stuck_lso", "crash", 0) and findings(result, "open_transaction", "crash", 0)
    # every other partition as the live broker had it, whichever copy speaks
    for name, broker in live.items():
        got = partition(result, broker["topic"], broker["partition"])
        assert (got.high_watermark, got.last_stable_offset) == (broker["high_watermark"],
                                                                      broker["last_stable_offset"]), name
    assert partition(result, "crash", 2).replicas == 1


@needs_corpus
def test_the_copy_cut_short_is_a_divergence_naming_both_brokers(two_brokers: tuple[Any, Any, int]) -> None:
    result, replicas, _ = two_brokers
    (diverged,) = findings(result, "replica_divergence", "crash", 0)
    assert diverged.severity == "warning" and diverged.first_offset == 60
    assert "broker 1 (broker-1)" in diverged.evidence and "broker 2 (broker-2)" in diverged.evidence
    assert "batch 60..69 of producer 1" in diverged.evidence  # what the intact copy holds there
    assert [f for f in result.findings if f.kind == "replica_divergence"] == [diverged]
    # broker 1's own audit: its checkpoint's HW capped at its log end, nothing reported beyond it
    (mine,) = [r for r in replicas if (r["topic"], r["partition"], r["broker_id"]) == ("crash", 0, 1)]
    assert (mine["log_end_offset"], mine["high_watermark"], mine["checkpoint_high_watermark"]) == (60, 60, 70)
    assert mine["hw_source"] == "capped_at_log_end" and mine["last_stable_offset"] <= mine["log_end_offset"]
    assert (mine["chosen"], mine["divergence"], mine["divergent_offset"]) == (False, "behind", 60)
    # every live copy is audited: two of each partition, one of crash-2
    counted: dict[tuple[str, int], int] = {}
    for r in replicas:
        counted[(r["topic"], r["partition"])] = counted.get((r["topic"], r["partition"]), 0) + 1
    assert counted[("crash", 2)] == 1 and counted[("crash", 0)] == counted[("crash", 1)] == 2
    assert all(r["divergence"] is None for r in replicas if (r["topic"], r["partition"]) != ("crash", 0))


@needs_corpus
def test_the_report_names_the_audited_copy_and_why(two_brokers: tuple[Any, Any, int]) -> None:
    result, _, _ = two_brokers
    page = (result.out_dir / "report.html").read_text()
    assert "<h2>Replicas</h2>" in page and "the only intact copy" in page


@needs_corpus
def test_one_copy_cut_short_alone_caps_its_hw_and_says_so(spark: Any, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    shutil.copytree(CRASHED / "logdirs", dump)
    cut = batches_as_dumped(CRASHED / "tools" / "dump-log" / "crash-0.txt")[60]["position"]
    with (dump / "crash-0" / "00000000000000000000.log").open("r+b") as f:
        f.truncate(cut)
    result, _ = scan(spark, dump, tmp_path / "out")
    p = partition(result, "crash", 0)
    assert (p.high_watermark, p.hw_source, p.log_end_offset) == (60, "capped_at_log_end", 60)
    assert p.last_stable_offset == 60 and p.held_records == 0
    (broken,) = findings(result, "invariant_violation", "crash", 0)
    assert "a high watermark of 70" in broken.evidence and "beyond the end of its log at 60" in broken.evidence
    # the replica's own snapshot (taken at 70) still says producer 1 is open from 60
    assert findings(result, "open_transaction", "crash", 0)
    assert not findings(result, "retention_lost_open_txn", "crash", 0)


# -- a real 3-broker cluster: a follower holding a different batch, a leader's copy cut short ----


def _rewrite_epoch(segment: Path, batch: dict[str, int], epoch: int) -> None:
    """Give the batch at ``batch['position']`` another producer epoch, with a valid CRC (a follower
    holding a different history, not a corrupt file)."""
    with segment.open("r+b") as f:
        f.seek(batch["position"])
        data = bytearray(f.read(batch["size"]))
        struct.pack_into(">h", data, 51, epoch)
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
        f.seek(batch["position"])
        f.write(data)


@pytest.fixture(scope="module")
def damaged_dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """The 3-broker cluster's log dirs, damaged: its folder, the offset changed, the offset cut."""
    dump = tmp_path_factory.mktemp("cluster") / "logdirs"
    shutil.copytree(REPLICATED / "logdirs", dump)
    dumped = REPLICATED / "tools" / "dump-log"
    # broker 3's repl-0 holds another epoch's batch at offset 44
    changed = 44
    batch = batches_as_dumped(dumped / "broker-3" / "repl-0.txt")[changed]
    _rewrite_epoch(dump / "broker-3" / "repl-0" / "00000000000000000000.log", batch, batch["epoch"] + 7)
    # broker 1's copy of repl-1 is cut short at offset 50, below the HW its checkpoint gives
    cut = min(b for b in batches_as_dumped(dumped / "broker-1" / "repl-1.txt") if b >= 50)
    position = batches_as_dumped(dumped / "broker-1" / "repl-1.txt")[cut]["position"]
    with (dump / "broker-1" / "repl-1" / "00000000000000000000.log").open("r+b") as f:
        f.truncate(position)
    return dump, changed, cut


@pytest.fixture(scope="module")
def damaged_cluster(spark: Any, damaged_dump: tuple[Path, int, int]) -> tuple[Any, list[dict[str, Any]], int, int]:
    dump, changed, cut = damaged_dump
    result, replicas = scan(spark, dump, dump.parent / "out")
    return result, replicas, changed, cut


def test_a_follower_holding_another_batch_is_a_critical_divergence_at_that_offset(
        damaged_cluster: tuple[Any, Any, int, int]) -> None:
    result, replicas, changed, _ = damaged_cluster
    expected = json.loads((REPLICATED / "expected.json").read_text())["partitions"]["repl-0"]
    p = partition(result, "repl", 0)
    assert p.broker_id == expected["leader"]
    assert (p.high_watermark, p.last_stable_offset) == (expected["high_watermark"],
                                                             expected["last_stable_offset"])
    (diverged,) = findings(result, "replica_divergence", "repl", 0)
    assert (diverged.severity, diverged.first_offset) == ("critical", changed)
    assert "broker 3 (broker-3)" in diverged.evidence and f"broker {expected['leader']} (broker-" in \
        diverged.evidence
    (third,) = [r for r in replicas if (r["topic"], r["partition"], r["broker_id"]) == ("repl", 0, 3)]
    assert (third["divergence"], third["divergent_offset"]) == ("conflict", changed)
    assert "epoch" in third["replica_holds"] and third["replica_holds"] != third["chosen_holds"]


def test_a_leaders_copy_cut_short_gives_way_and_the_verdict_is_the_clusters(
        damaged_cluster: tuple[Any, Any, int, int]) -> None:
    result, replicas, _, cut = damaged_cluster
    expected = json.loads((REPLICATED / "expected.json").read_text())["partitions"]["repl-1"]
    p = partition(result, "repl", 1)
    assert p.broker_id != 1 and "cut short" in p.replica_choice_reason
    assert (p.high_watermark, p.last_stable_offset) == (expected["high_watermark"],
                                                             expected["last_stable_offset"])
    (diverged,) = findings(result, "replica_divergence", "repl", 1)
    assert (diverged.severity, diverged.first_offset) == ("warning", cut)
    assert not findings(result, "invariant_violation", "repl", 1)  # the copy audited is intact
    (first,) = [r for r in replicas if (r["topic"], r["partition"], r["broker_id"]) == ("repl", 1, 1)]
    assert (first["hw_source"], first["high_watermark"], first["log_end_offset"]) == ("capped_at_log_end", cut, cut)


def test_untouched_partitions_of_the_damaged_cluster_agree_everywhere(
        damaged_cluster: tuple[Any, Any, int, int]) -> None:
    result, replicas, _, _ = damaged_cluster
    damaged = {("repl", 0), ("repl", 1)}
    assert {(f.topic, f.partition) for f in result.findings if f.kind == "replica_divergence"} == damaged
    expected = json.loads((REPLICATED / "expected.json").read_text())
    for name, live in expected["partitions"].items():
        got = partition(result, live["topic"], live["partition"])
        assert (got.high_watermark, got.last_stable_offset) == (live["high_watermark"],
                                                                      live["last_stable_offset"]), name
    per_partition = {(r["topic"], r["partition"]) for r in replicas if r["topic"] == "repl"}
    assert all(sum(1 for r in replicas if (r["topic"], r["partition"]) == k) == 3 for k in per_partition)


def test_the_other_copies_audited_at_once_as_one_rank_at_a_time(
        spark: Any, damaged_dump: tuple[Path, int, int], damaged_cluster: tuple[Any, Any, int, int],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The copies of ranks 2 and 3 are audited in one pass, told apart by their broker; audited
    one rank at a time, each rank holding one copy per partition, they give the same rows."""
    transactions = importlib.import_module("txn_audit.reconstruct.transactions")
    dump, _, _ = damaged_dump
    _, together, _, _ = damaged_cluster
    grouped: list[list[tuple[int, ...]]] = []

    def per_rank(ranked: Any) -> list[tuple[int, ...]]:
        grouped.append(real(ranked))
        return [(rank,) for rank in range(2, ranked.ranks + 1)]

    real = transactions.copy_groups
    monkeypatch.setattr(transactions, "copy_groups", per_rank)
    _, apart = scan(spark, dump, tmp_path / "out")
    assert grouped == [[(2, 3)]]  # what the scan of the fixture did: one group

    def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["broker_id"]))

    assert len(together) == 15 and ordered(together) == ordered(apart)
    assert {r["divergence"] for r in together} == {None, "conflict", "behind"}


# -- several log dirs per broker (JBOD), a partition being moved between them -------------------


@needs_corpus
def test_jbod_and_a_future_copy_audit_as_one_log_dir(spark: Any, tmp_path: Path) -> None:
    """One broker with two log dirs, its partitions split between them, each dir with its own
    checkpoints; crash-1 is being moved to the second dir (a ``-future`` copy there): the
    verdicts are those of the broker's single log dir."""
    source = CRASHED / "logdirs"
    dump = tmp_path / "broker-1"
    first, second = dump / "data-a", dump / "data-b"
    moved = {"crash-2", "__transaction_state-1"}
    for log_dir, keep in ((first, lambda n: n not in moved), (second, lambda n: n in moved)):
        log_dir.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.is_dir() and "-" in entry.name and keep(entry.name):
                shutil.copytree(entry, log_dir / entry.name)
            elif entry.is_file() and entry.name.endswith("-checkpoint"):
                lines = entry.read_text().splitlines()
                if len(lines) >= 2 and lines[1].isdigit():
                    rows = [r for r in lines[2:] if keep("-".join(r.split()[:2]))]
                    (log_dir / entry.name).write_text("\n".join(lines[:1] + [str(len(rows))] + rows) + "\n")
                else:
                    shutil.copy(entry, log_dir / entry.name)
            elif entry.is_file():
                shutil.copy(entry, log_dir / entry.name)
    shutil.copytree(source / "crash-1", second / "crash-1.0123456789abcdef0123456789abcdef-future")
    result, replicas = scan(spark, dump, tmp_path / "out")
    live = json.loads((CRASHED / "expected.json").read_text())["partitions"]
    for name, broker in live.items():
        got = partition(result, broker["topic"], broker["partition"])
        assert (got.high_watermark, got.last_stable_offset, got.replicas) == (
            broker["high_watermark"], broker["last_stable_offset"], 1), name
    assert partition(result, "crash", 2).log_dir == "data-b"
    assert not [f for f in result.findings if f.kind == "replica_divergence"]
    assert len([r for r in replicas if (r["topic"], r["partition"]) == ("crash", 1)]) == 1
