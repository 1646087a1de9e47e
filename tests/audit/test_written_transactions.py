"""``partition_transactions`` written by the pass's own tasks (``reconstruct.transaction_files``):
the same rows as Spark's join and write of the pass's transactions."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.audit.builders import rank
from tests.audit.producer_walk import COMPACTED, TOLERANCE_MS
from tests.audit.test_pass_files import LEADER_DIR, _expected, _items, _tables, _write, _write_in_log_order
from tests.conftest import SampleScan
from txn_audit.reconstruct import pass_files, prepare_follows, transaction_files
from txn_audit.reconstruct.ordered_pass import MARKER, pass_input, transaction_pass
from txn_audit.reconstruct.pass_files import PASS_ITEM, sorted_pass_input
from txn_audit.reconstruct.prepare_follows import FOLLOW_FIELDS, PREPARE_FIELDS, PrepareFile, PrepareFollower
from txn_audit.reconstruct.transaction_files import pass_writing_transactions
from txn_audit.replica_tasks.commit import file_name, finish_table, start_table
from txn_audit.schemas import PARTITION_TRANSACTIONS, PRODUCER_IDS, RAW_TABLES, in_ms, read_ms

STATES = {"COMMIT": "committed", "ABORT": "aborted", None: "open"}


def _as_table_rows(txns: list[dict[str, Any]], ids: dict[int, str]) -> list[dict[str, Any]]:
    """The pass's transactions as ``partition_transactions`` rows, computed row by row: the
    producer's last write on the partition is the newest event of its last transaction."""
    last: dict[tuple[Any, ...], tuple[int, Any]] = {}
    for txn in txns:
        key = (txn["topic"], txn["partition"], txn["producer_id"])
        if key not in last or txn["txn_seq"] > last[key][0]:
            last[key] = (txn["txn_seq"], txn["last_event_timestamp"])
    rows = []
    for txn in txns:
        row = {name: txn.get(name) for name in PARTITION_TRANSACTIONS.names}
        row |= {"transactional_id": ids.get(txn["producer_id"]), "state": STATES.get(txn["marker_type"], "ended"),
                "producer_last_timestamp": last[(txn["topic"], txn["partition"], txn["producer_id"])][1],
                "source": "log"}
        rows.append(row)
    return sorted(rows, key=repr)


def _task_rows(items: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(items, schema=PASS_ITEM)


def _known(ids: dict[int, str]) -> pa.Table:
    """``ids`` as the driver hands them to the pass (``PRODUCER_IDS``)."""
    return pa.Table.from_pylist([{"producer_id": pid, "transactional_id": tid, "transaction_version": 1}
                                 for pid, tid in ids.items()], schema=PRODUCER_IDS)


def _write_prepares(directory: Path, prepares: list[dict[str, Any]]) -> None:
    """``prepares`` as the coordinator pass's tasks write them: in two files, out of order."""
    start_table(str(directory))
    for task, part in enumerate((prepares[1::2], prepares[::2])):
        with PrepareFile(str(directory), file_name(task, "coordinator")) as written:
            for start in range(0, len(part), 5):  # as a task adds each item's
                written.add(pa.Table.from_pylist(part[::-1][start:start + 5], schema=PREPARE_FIELDS))


def _random_prepares(tables: dict[str, list[dict[str, Any]]], seed: int) -> list[dict[str, Any]]:
    """Prepare* records on the partitions of ``tables``' markers, at times among theirs."""
    rng = random.Random(seed)
    markers = tables["control_markers"]
    prepares = []
    for offset, marker in enumerate(rng.sample(markers, 12)):
        prepares.append({"topic": marker["topic"], "partition": marker["partition"],
                         "producer_id": marker["producer_id"] - rng.choice((0, 5)),
                         "epoch": marker["producer_epoch"], "ts": marker["timestamp"] - rng.choice((0, 1, 500)),
                         "txn_log_partition": 0, "txn_log_offset": offset, "transactional_id": f"tx-{offset}",
                         "state": rng.choice(("PrepareCommit", "PrepareAbort")),
                         "next_state": rng.choice((None, "CompleteCommit", "CompleteAbort")),
                         "started": marker["timestamp"] - 1_000, "timeout_ms": 60_000})
    # and on a partition no task reads
    prepares += [{"topic": "unread", "partition": partition, "producer_id": 7, "epoch": 0, "ts": 1,
                  "txn_log_partition": 1, "txn_log_offset": partition, "transactional_id": "tx-unread",
                  "state": "PrepareCommit", "next_state": None, "started": 0, "timeout_ms": 60_000}
                 for partition in range(3)]
    return prepares


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("chunk_rows", "round_producers", "share_rows", "in_log_order"),
                         [(10**6, None, 1, False), (3, None, 1, False), (10**6, 1, 1, False), (10**6, None, 10**9, False),
                          (10**6, None, 10**9, True), (3, None, 10**9, True)])
def test_each_task_writes_its_replicas_transactions(tmp_path: Path, seed: int, chunk_rows: int,
                                                    round_producers: int | None, share_rows: int, in_log_order: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction_files, "CHUNK_ROWS", chunk_rows)  # last writes carried across chunks
    if round_producers is not None:  # a task passes over its producers in rounds, into one file
        monkeypatch.setattr(pass_files, "ROUND_PRODUCERS", round_producers)
    tables = _tables(seed)
    files = _write_in_log_order(tmp_path / "raw", tables) if in_log_order else _write(tmp_path / "raw", tables, seed)
    items = [item for item in _items(files, parallelism=8, share_rows=share_rows) if item["log_dir"] == LEADER_DIR]
    assert any(len(pass_files.producer_rounds(item)) > 1 for item in items) == (round_producers is not None)
    # whole replicas (no shares) whose row groups give log order: small ones passed over together,
    # in runs of several (``pass_files.group_input``); shuffled files, one at a time
    grouped = [len(group) for half in (items[: len(items) // 2], items[len(items) // 2:])
               for group in transaction_files.item_groups(half)]
    assert (max(grouped) > 1) == (share_rows > 1 and round_producers is None and in_log_order)
    producers = sorted({r["producer_id"] for r in tables["batches"] if r["producer_id"] >= 0})
    # some producers' transactional ids known (none for seed 2: a dump without a transaction log)
    ids = {} if seed == 2 else {pid: f"tx-{pid}" for pid in random.Random(seed).sample(producers, len(producers) // 2)}
    directory = str(tmp_path / "partition_transactions")
    start_table(directory)
    with pytest.raises(FileExistsError):
        start_table(directory)

    prepares = _random_prepares(tables, seed)
    _write_prepares(tmp_path / "prepares", prepares)
    follows_dir = str(tmp_path / "follows")
    start_table(follows_dir)
    output = next(b for item in items for b in transaction_pass(sorted_pass_input(item),
                                                                 late_tolerance_ms=TOLERANCE_MS)).schema

    replicas = {(item["topic"], item["partition"]) for item in items}
    # the items in two tasks; the records on no item's partition followed once, by item ``strays_task``
    unread = [p for p in prepares if (p["topic"], p["partition"]) not in replicas]
    out = []
    for task in (items[: len(items) // 2], items[len(items) // 2:]):
        out += pass_writing_transactions(iter([_task_rows(task)]), late_tolerance_ms=TOLERANCE_MS,
                                         unsequenced_topics=COMPACTED, directory=directory, job="job",
                                         output=output, prepares_dir=str(tmp_path / "prepares"),
                                         follows_dir=follows_dir, strays_task=int(items[-1]["task"]),
                                         read_partitions=sorted(replicas), producer_ids=_known(ids))

    assert all(b.schema == output for b in out)
    rows = [r for b in out for r in pa.Table.from_batches([b]).to_pylist()]
    expected = _expected(tables, 1)
    assert not any(r["txn"] for r in rows)
    assert sorted(({"event": r["event"], "txn": r["txn"]} for r in rows if r["event"]), key=repr) == \
        [r for r in expected if r["event"]]
    # each Prepare* record of the leader's partitions followed once, by the task of its producer's
    # share, as a follower that sees all the partition's markers at once says; each of the others
    # once, with no marker, by one task; a file per task, named after its first item
    follow_files = sorted(Path(follows_dir).iterdir())
    assert [f.name for f in follow_files] == sorted(file_name(task[0]["task"], "job")
                                                    for task in (items[: len(items) // 2], items[len(items) // 2:]))
    follows = sorted(pa.concat_tables(pq.read_table(f, schema=FOLLOW_FIELDS) for f in follow_files).to_pylist(),
                     key=repr)
    assert len(unread) == 3
    expected_follows = [p | {"has_marker": False, "next_marker_type": None, "next_marker_offset": None}
                        for p in unread]
    for topic, partition in sorted(replicas):
        mine = [p for p in prepares if (p["topic"], p["partition"]) == (topic, partition)]
        follower = PrepareFollower(pa.Table.from_pylist(mine, schema=PREPARE_FIELDS))
        markers = pa.Table.from_pylist(  # as read: times in epoch ms
            [m for m in tables["control_markers"] if (m["topic"], m["partition"], m["broker_id"]) ==
             (topic, partition, 1)], schema=in_ms(RAW_TABLES["control_markers"]))
        follower.add(pass_input(markers, MARKER).combine_chunks().to_batches()[0])
        expected_follows += follower.rows().to_pylist()
    assert follows == sorted(expected_follows, key=repr)
    assert len(follows) == len(prepares)
    assert any(f["has_marker"] for f in follows) and not all(f["has_marker"] for f in follows)
    files = sorted(Path(directory).iterdir())
    # one file per task that found transactions, named as Spark names its files after the task's
    # first item; nothing else left

    def found(item: dict[str, Any]) -> bool:
        return any(r["txn"] and r["txn"]["producer_id"] % item["shares"] == item["share"] and
                   r["txn"]["topic"] == item["topic"] and r["txn"]["partition"] == item["partition"]
                   for r in expected)

    assert [f.name for f in files] == sorted(file_name(task[0]["task"], "job")
                                             for task in (items[: len(items) // 2], items[len(items) // 2:])
                                             if any(found(item) for item in task))
    written = pa.concat_tables(pq.read_table(f) for f in files)
    assert written.schema == PARTITION_TRANSACTIONS
    if chunk_rows == 3:  # a row group per spilled chunk
        assert max(pq.read_metadata(f).row_group(0).num_rows for f in files) <= 3
    rows_written = read_ms(written).to_pylist()  # as the package reads them: epoch ms
    assert sorted(rows_written, key=repr) == _as_table_rows([r["txn"] for r in expected if r["txn"]], ids)
    assert {r["state"] for r in written.to_pylist()} == {"committed", "aborted", "ended", "open"}


def test_small_replicas_run_together_one_per_partition() -> None:
    """``item_groups``: consecutive small whole replicas in runs of at most ``group_rows`` rows,
    never two replicas of one partition in a run; a share, a replica of ``group_rows`` rows or
    more, or one whose row groups overlap (not in log order), alone; the items' order kept."""
    def item(topic: str, partition: int, rows: int, shares: int = 1, overlapping: bool = False) -> dict[str, Any]:
        groups = [{"low": 0, "high": rows - 1, "uri": "f", "index": 0, "producer_high": 9},
                  {"low": rows - 1 if overlapping else rows, "high": rows, "uri": "f", "index": 1, "producer_high": 9}]
        return {"topic": topic, "partition": partition, "rows": rows, "shares": shares, "share": 0,
                "batch_groups": groups, "marker_groups": []}

    work = [item("a", 0, 10), item("a", 1, 10), item("a", 0, 10), item("b", 0, 50), item("b", 1, 10),
            item("c", 0, 100), item("c", 1, 5), item("c", 2, 30, shares=2), item("d", 0, 1), item("d", 1, 2),
            item("d", 2, 3, overlapping=True), item("d", 3, 4)]
    groups = [[(i["topic"], i["partition"]) for i in group] for group in transaction_files.item_groups(work, 60)]
    # a second a-0 starts a run; b-1 would pass 60 rows; c-0 is too large, c-2 a share, d-2 overlaps
    assert groups == [[("a", 0), ("a", 1)], [("a", 0), ("b", 0)], [("b", 1)], [("c", 0)], [("c", 1)], [("c", 2)],
                      [("d", 0), ("d", 1)], [("d", 2)], [("d", 3)]]


def test_a_table_no_task_wrote_gets_an_empty_file(tmp_path: Path) -> None:
    directory = str(tmp_path / "t")
    start_table(directory)
    finish_table(directory, PARTITION_TRANSACTIONS)
    (only,) = Path(directory).iterdir()
    assert pq.read_table(only).schema == PARTITION_TRANSACTIONS and pq.read_metadata(only).num_rows == 0
    finish_table(directory, PARTITION_TRANSACTIONS)  # a table with a file is left as it is
    assert list(Path(directory).iterdir()) == [only]


@pytest.mark.spark
def test_a_scan_writes_the_rows_spark_would(spark: Any, sample_scan: SampleScan) -> None:
    """The sample scan's ``partition_transactions`` (written by the pass's tasks) against the
    same table computed by Spark from the pass's rows."""
    from txn_audit.reconstruct import (
        chosen_replicas,
        on_replicas,
        partition_transactions,
        producer_pass,
        producer_transactional_ids,
        transaction_rows,
    )
    from txn_audit.replica_tasks import replicas_rows
    from txn_audit.tables import load_raw_tables, load_table

    tables = sample_scan.out / "tables"
    # the pass's tasks handing their transactions to Spark, which adds the snapshots' in a query
    raw = load_raw_tables(spark, tables)
    ranked = rank(raw)
    replicas, keys = chosen_replicas(ranked), ranked.keys(1)
    batches, markers = (on_replicas(raw["batches"], replicas, keys, raw.files("batches")),
                        on_replicas(raw["control_markers"], replicas, keys, raw.files("control_markers")))
    ids = producer_transactional_ids(on_replicas(raw["txn_log"], replicas, keys, raw.files("txn_log")))
    passed = producer_pass(batches, markers, late_tolerance_ms=sample_scan.result.options.late_tolerance_ms,
                           batch_files=replicas_rows(raw.files("batches"), keys),
                           marker_files=replicas_rows(raw.files("control_markers"), keys))
    by_spark = partition_transactions(transaction_rows(passed), markers,
                                      on_replicas(raw["producer_snapshots"], replicas, keys,
                                                  raw.files("producer_snapshots")), replicas, ids,
                                      replicas_rows(raw.files("producer_snapshots"), keys))
    files = [f for f in (tables / "partition_transactions").iterdir() if f.suffix == ".parquet"]
    assert files and all(pq.read_metadata(f).created_by.startswith("parquet-cpp-arrow") for f in files)
    written = load_table(spark, tables, "partition_transactions")
    assert written.count() > 50
    assert sorted(map(repr, written.collect())) == sorted(map(repr, by_spark.collect()))


@pytest.mark.parametrize("seed", range(3))
def test_a_task_reads_the_prepare_records_of_its_partitions(tmp_path: Path, seed: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Prepare* records written as the coordinator pass's tasks write them (small chunks and row
    groups here) are read back by partition, or all those on none of some partitions (those
    without a topic or partition among them), as a filter over every record selects them."""
    monkeypatch.setattr(prepare_follows, "PREPARE_CHUNK_ROWS", 7)
    monkeypatch.setattr(prepare_follows, "PREPARE_ROW_GROUP", 3)
    rng = random.Random(seed)
    partitions = [("a", 0), ("a", 1), ("b", 0), ("b", 2), (None, 1), ("c", None)]
    records = [{"topic": topic, "partition": partition, "producer_id": rng.randrange(5), "epoch": 0,
                "ts": rng.randrange(100), "txn_log_partition": n % 3, "txn_log_offset": n, "transactional_id": f"t{n}",
                "state": "PrepareCommit", "next_state": None, "started": 0, "timeout_ms": 1}
               for n in range(40) for topic, partition in [rng.choice(partitions)]]
    _write_prepares(tmp_path / "prepares", records)
    files = sorted((tmp_path / "prepares").iterdir())
    assert len(files) == 2
    for f in files:  # each chunk ordered by topic and partition, in small row groups
        metadata = pq.read_metadata(f)
        assert metadata.num_row_groups >= 3 and max(metadata.row_group(i).num_rows
                                                    for i in range(metadata.num_row_groups)) <= 3
        keys = [(r["topic"] is None, r["topic"] or "", r["partition"] is None, r["partition"] or 0)
                for r in pq.read_table(f).to_pylist()]
        chunks = [keys[i:i + 10] for i in range(0, len(keys), 10)]  # added 5 at a time, 7 make a chunk
        assert all(chunk == sorted(chunk) for chunk in chunks) and keys != sorted(keys)

    def read(wanted: list[tuple[str, int]], elsewhere: bool = False) -> list[dict[str, Any]]:
        found = prepare_follows.read_prepares(str(tmp_path / "prepares"), wanted, elsewhere=elsewhere)
        assert found.schema == PREPARE_FIELDS
        return sorted(found.to_pylist(), key=repr)

    for wanted in ([("a", 1)], [("a", 0), ("b", 2), ("z", 0)], [], [("a", 0), ("a", 1), ("b", 0), ("b", 2)]):
        assert read(wanted) == sorted((r for r in records if (r["topic"], r["partition"]) in wanted), key=repr)
        assert read(wanted, elsewhere=True) == sorted(
            (r for r in records if (r["topic"], r["partition"]) not in wanted), key=repr)
    assert read([], elsewhere=True) == sorted(records, key=repr)


def test_a_scan_leaves_only_its_tables(sample_scan: SampleScan) -> None:
    """The passes' intermediates (``DerivedOutput.work_dir``) are gone once the rules have read them."""
    from txn_audit.ledger import LEDGER_FILE, Ledger
    from txn_audit.schemas import ALL_TABLES

    tables = sample_scan.out / "tables"
    assert sorted(p.name for p in tables.iterdir()) == sorted([*ALL_TABLES, LEDGER_FILE])
    ledger = Ledger.load(tables)
    assert ledger is not None and sorted(ledger.entries) == sorted(ALL_TABLES)  # no working table left
    assert {name: e.stage for name, e in ledger.entries.items() if name in ("batches", "findings",
                                                                            "partition_transactions")} \
        == {"batches": "ingest", "partition_transactions": "reconstruct", "findings": "incidents"}
    assert ledger.options is not None and ledger.options["as_of_ms"] == sample_scan.result.as_of_ms

