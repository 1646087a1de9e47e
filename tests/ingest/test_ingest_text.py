"""Text dumps ingest into the same raw-table rows as the binary log dirs (no Spark needed)."""

from __future__ import annotations

import pytest

from tests.realcorpus import SCENARIOS, needs_corpus, scenario_dir
from txn_audit.ingest.discover import discover
from txn_audit.ingest.worker import TableRows, decode_task
from txn_audit.schemas import RAW_TABLES

pytestmark = needs_corpus

#: columns that differ by construction: where the row came from, and what the text cannot show
_SKIP = {"broker_id", "log_dir", "file", "key_version", "value_version", "txn_start_timestamp",
         "client_transaction_version", "previous_producer_id", "next_producer_id", "next_producer_epoch"}


def _rows(dump: str, kind: str) -> dict[str, list[tuple[object, ...]]]:
    inv = discover(dump, kind)
    out = TableRows()
    for task in inv.tasks:
        for _ in decode_task(task, out):
            pass
    tables: dict[str, list[tuple[object, ...]]] = {}
    for batch in out.drain():
        name = batch.column(0)[0].as_py()
        cols = [f.name for f in RAW_TABLES[name]]
        keep = [i for i, c in enumerate(cols) if c not in _SKIP]
        for row in batch.column(name).to_pylist():
            values = [row[c] for c in cols]
            if name == "txn_log" and values[cols.index("topic_partitions")] is not None:
                values[cols.index("topic_partitions")] = sorted(
                    (p["topic"], p["partition"]) for p in values[cols.index("topic_partitions")]
                )
            tables.setdefault(name, []).append(tuple(values[i] for i in keep))
    return {k: sorted(v, key=repr) for k, v in tables.items()}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_text_rows_equal_binary_rows(scenario: str) -> None:
    binary = _rows(str(scenario_dir(scenario) / "logdirs"), "logdirs")
    text = _rows(str(scenario_dir(scenario) / "tools"), "text")
    binary.pop("decode_issues", None)
    assert text.pop("decode_issues", []) == []
    binary = {k: [r for r in v if r[0] != "__cluster_metadata"] for k, v in binary.items()}
    assert text.keys() == binary.keys()
    for name in text:
        assert text[name] == binary[name], name


def test_auto_picks_text_without_log_dirs() -> None:
    tools = scenario_dir(SCENARIOS[0]) / "tools"
    inv = discover(tools)
    assert inv.tasks and all(t.kind == "dumplog_text" for t in inv.tasks)
    assert all(r.high_watermark is None for r in map(lambda d: type("R", (), d), inv.partition_offsets_rows()))
    assert {s["kind"] for s in inv.segments} >= {"dump_log", "kafka_transactions_find_hanging", "text"}
