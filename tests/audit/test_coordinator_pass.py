"""The coordinator log passed over a partition at a time, against Spark's windows over every record.

Random coordinator logs over several ``__transaction_state`` partitions: transactional ids that
go through Ongoing, Prepare* and Complete* records, ids that expire (tombstones) and come back,
producer ids that move from id to id, records of one offset in two partitions. And the
real brokers' logs of the corpus, as a scan ingests them.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from typing import Any

import pytest

from tests.audit.builders import RawBuilder, rank
from tests.kafkacorpus import CORPUS
from tests.realcorpus import REALCORPUS, needs_corpus

pytestmark = pytest.mark.spark

T0 = 1_800_000_000_000
DATA = [("a", 0), ("a", 1), ("b", 0)]


#: the random logs' partition count
LOG_PARTITIONS = 3


def _random_log(seed: int, *, spread: bool = False) -> RawBuilder:
    """Ids each in one partition of the log (by their hash, as Kafka places them); ``spread``:
    one id also has records in another partition."""
    from txn_audit.formats.txn_state import txn_partition_for

    rng = random.Random(seed)
    b = RawBuilder()
    ids = [f"tx-{n}" for n in range(8)]
    pids = {tid: 100 + n for n, tid in enumerate(ids)}
    epochs = dict.fromkeys(ids, 0)
    # an id whose first record (after compaction) is of the last epoch
    b.coordinator("tx-last", pid=99, epoch=32767, state="CompleteAbort", partitions=[], ts=T0,
                  log_partition=txn_partition_for("tx-last", LOG_PARTITIONS), version=2)
    for step in range(rng.randint(20, 60)):
        tid = rng.choice(ids)
        log_partition = txn_partition_for(tid, LOG_PARTITIONS)
        ts = T0 + step * 10
        roll = rng.random()
        if roll < 0.06 or step == 5:
            b.coordinator_tombstone(tid, ts=ts, log_partition=log_partition)
            continue
        if roll < 0.12:  # a new producer id; now and then one another id had before
            pids[tid] = rng.choice([max(pids.values()) + 1, *pids.values()])
            epochs[tid] = 0
        listed = rng.sample(DATA, rng.randint(1, len(DATA)))
        version = rng.choice([0, 2, None])
        common = {"pid": pids[tid], "epoch": epochs[tid], "ts": ts, "start": ts - 5, "log_partition": log_partition,
                  "version": version}
        state = rng.choice(["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"])
        b.coordinator(tid, state=state, partitions=listed if state in ("Ongoing", "PrepareCommit", "PrepareAbort")
                      else rng.choice([None, []]), **common)
        if state.startswith("Prepare") and rng.random() < 0.7:  # then decided
            b.coordinator(tid, state=state.replace("Prepare", "Complete"), partitions=[], **common)
        # epochs bumped by none, one or two; one id reaches the last epoch
        epochs[tid] = min(32767, epochs[tid] + rng.randint(0, 2))
        if step == 10:
            epochs[tid] = 32767
            b.coordinator(tid, state="Ongoing", partitions=listed, **common | {"epoch": 32767})
    if spread:  # the first id's next records in its own partition, then in another
        own = txn_partition_for(ids[0], LOG_PARTITIONS)
        other = (own + 1) % LOG_PARTITIONS
        for log_partition, state in ((own, "PrepareCommit"), (other, "CompleteCommit"), (own, "PrepareAbort")):
            b.coordinator(ids[0], pid=pids[ids[0]], epoch=epochs[ids[0]], state=state, partitions=DATA[:1],
                          ts=T0 + 1_000, log_partition=log_partition)
    b.batch("a", 0, ts=T0)  # a data partition, so that the dump has one
    return b


@pytest.fixture
def groupings(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    return _spied_groupings(monkeypatch)


def _spied_groupings(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each grouping of the pass's ids for one in two partitions found, from now on: the
    pass groups them only when an id is not where its hash places it."""
    # the module (the package's ``transactions`` is a function of it)
    transactions = importlib.import_module("txn_audit.reconstruct.transactions")

    found: list[bool] = []
    real = transactions._in_two_partitions

    def grouping(passed: Any) -> bool:
        found.append(real(passed))
        return found[-1]

    monkeypatch.setattr(transactions, "_in_two_partitions", grouping)
    return found


def _sorted(rows: Any) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def _rows(frame: Any) -> list[dict[str, Any]]:
    return _sorted(r.asDict(recursive=True) for r in frame.collect())


def _assert_pass_equals_windows(records: Any, files: Any, prepares_dir: Path | None = None,
                                partitions: int | None = None) -> Any:
    """The pass's answers over ``records`` (through ``files``) equal the windows'; the log. With
    ``prepares_dir``, the Prepare* records are read from the files the pass's tasks wrote there,
    or that Spark wrote from the windows, as a task of the producer pass reads them."""
    from txn_audit.reconstruct import coordinator_current, prepare_records, producer_transactional_ids
    from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, read_prepares
    from txn_audit.reconstruct.transactions import CoordinatorLog, epoch_candidates

    log = CoordinatorLog.of(records, files, None if prepares_dir is None else str(prepares_dir), partitions)
    windows = _rows(prepare_records(records).select(*PREPARE_FIELDS.names))
    if log.passed is not None:
        assert _rows(log.prepares()) == windows
        assert _rows(log.epoch_candidates()) == _rows(epoch_candidates(records))
    # the pass's few rows, chosen across the log's partitions on the driver
    assert _sorted(log.current_rows().to_pylist()) == _rows(coordinator_current(records))
    assert _sorted(log.producer_id_rows().to_pylist()) == _rows(producer_transactional_ids(records))
    if prepares_dir is not None:
        assert log.prepare_files() == str(prepares_dir)
        read = read_prepares(str(prepares_dir), [], elsewhere=True)
        assert sorted(read.to_pylist(), key=lambda r: repr(sorted(r.items()))) == windows
        topic, partition = DATA[0]
        assert sorted(read_prepares(str(prepares_dir), [DATA[0]]).to_pylist(), key=lambda r: repr(sorted(r.items()))) \
            == [r for r in windows if (r["topic"], r["partition"]) == (topic, partition)]
    return log


@pytest.mark.parametrize("seed", range(8))
def test_the_pass_over_each_partition_gives_what_the_windows_give(spark: Any, seed: int, tmp_path: Path,
                                                                  groupings: list[bool]) -> None:
    from txn_audit.tables import load_raw_tables

    b = _random_log(seed)
    # the log's last partition holds records: the pass knows the partition count
    assert max(r["partition"] for r in b.rows["txn_log"]) == LOG_PARTITIONS - 1
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    # the Prepare* records among the pass's rows, or (every other seed) in files of its tasks
    written = tmp_path / "prepares" if seed % 2 else None
    log = _assert_pass_equals_windows(tables["txn_log"], tables.files("txn_log"), written)
    assert log.passed is not None
    assert (written is None) == (log.prepares_dir is None)
    if written is not None:  # a file per task, and no Prepare* row left among the pass's
        assert log.passed.where("prepare is not null").isEmpty()
        assert [f.suffix for f in written.iterdir()] == [".parquet"] * len(list(written.iterdir())) != []
    records = b.rows["txn_log"]
    assert len({r["partition"] for r in records}) > 1
    assert any(r["tombstone"] for r in records)
    assert log.prepares().count() == sum(len(r["topic_partitions"] or []) for r in records
                                         if (r["state"] or "").startswith("Prepare"))
    epochs = {r["producer_epoch"] for r in log.epoch_candidates().collect()}
    assert 32767 in epochs and epochs - {32767}  # both kinds of candidates
    assert groupings == []  # every id where its hash places it: none was grouped


def test_an_id_in_two_partitions_takes_the_windows(spark: Any, tmp_path: Path, groupings: list[bool]) -> None:
    """The pass orders each partition alone: an id with records in two of them (the log's
    partition count changed) makes the log take the windows, which order all its records."""
    from txn_audit.tables import load_raw_tables

    b = _random_log(3, spread=True)
    assert len({r["partition"] for r in b.rows["txn_log"] if r["transactional_id"] == "tx-0"}) == 2
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    log = _assert_pass_equals_windows(tables["txn_log"], tables.files("txn_log"))
    assert log.passed is None
    # the files of Prepare* records the pass's tasks wrote give way to the windows' records
    log = _assert_pass_equals_windows(tables["txn_log"], tables.files("txn_log"), tmp_path / "prepares")
    assert log.passed is None
    assert groupings == [True, True]  # the misplaced id made each log group the ids, which found it


def test_a_partition_of_tombstones_alone_gives_no_epoch_or_producer_row(spark: Any, tmp_path: Path) -> None:
    """Compaction can leave a partition of the log with nothing but its ids' tombstones: the pass
    gives each id's tombstone as its newest record, and no producer or epoch row, as the windows."""
    from txn_audit.formats.txn_state import txn_partition_for
    from txn_audit.tables import load_raw_tables

    b = _random_log(2)
    gone = "gone"
    log_partition = txn_partition_for(gone, LOG_PARTITIONS)
    b.rows["txn_log"] = [r for r in b.rows["txn_log"] if r["partition"] != log_partition]
    b.coordinator_tombstone(gone, ts=T0, log_partition=log_partition)
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    log = _assert_pass_equals_windows(tables["txn_log"], tables.files("txn_log"), tmp_path / "prepares",
                                      LOG_PARTITIONS)
    assert log.passed is not None
    assert [r["transactional_id"] for r in log.current_rows().to_pylist()
            if r["txn_log_partition"] == log_partition] == [gone]
    assert gone not in log.producer_id_rows().column("transactional_id").to_pylist()
    assert log.epoch_candidates().where(f"partition = {log_partition}").isEmpty()


@pytest.mark.parametrize("dump", [
    pytest.param(REALCORPUS / "healthy", marks=needs_corpus),
    pytest.param(REALCORPUS / "timeout-abort", marks=needs_corpus),
    CORPUS / "kafka-4.4.0" / "eos",
    CORPUS / "kafka-4.4.0" / "follower-killed",
    CORPUS / "kafka-4.1.2" / "epoch-exhaustion-abort",
    CORPUS / "kafka-4.0.0" / "fenced-zombie",
    CORPUS / "kafka-2.8.2" / "healthy",
], ids=lambda path: f"{Path(path).parent.name}/{Path(path).name}")
def test_on_real_brokers_logs_the_pass_gives_what_the_windows_give(spark: Any, dump: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The coordinator logs real brokers wrote, as a scan ingests them; on a dump of several
    brokers, the chosen copy of each partition, read through the manifest of their rows."""
    from txn_audit import api
    from txn_audit.reconstruct import on_replicas
    from txn_audit.reconstruct.transactions import log_partitions
    from txn_audit.replica_tasks import replicas_rows
    from txn_audit.tables import load_raw_tables

    api.scan(dump / "logdirs", tmp_path / "scan", spark=spark, options=api.AuditOptions(progress=False, quality=False, report=False))
    raw = load_raw_tables(spark, tmp_path / "scan" / "tables")
    ranked = rank(raw)
    keys = ranked.keys(1)
    records = on_replicas(raw["txn_log"], ranked.of_rank(1), keys, raw.files("txn_log"))
    found = _spied_groupings(monkeypatch)  # after the scan: only this log's groupings
    # the partition count as the scan finds it: every partition folder of the log, empty or not
    partitions = log_partitions(keys)
    log = _assert_pass_equals_windows(records, replicas_rows(raw.files("txn_log"), keys), tmp_path / "prepares",
                                      partitions)
    assert log.passed is not None
    assert log.prepares().count() > 0 and log.current_rows().num_rows > 0
    # Kafka placed every id where its hash says, for the log's partition count (the corpus's
    # brokers ran with transaction.state.log.num.partitions=3)
    assert partitions == 3
    assert found == []
