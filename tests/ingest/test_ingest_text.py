"""Text dumps ingest into the same raw-table rows as the binary log dirs (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kafkacorpus import CorpusScenario
from tests.kafkacorpus import scenarios as kafka_scenarios
from tests.realcorpus import SCENARIOS, expected_json, needs_corpus, offsets_json, scenario_dir
from txn_audit.ingest.discover import discover
from txn_audit.ingest.tasks import TableRows
from txn_audit.ingest.worker import decode_task
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
    scenario = "hanging-unadded-partition"
    tools = scenario_dir(scenario) / "tools"
    inv = discover(tools)
    assert inv.tasks and all(t.kind == "dumplog_text" for t in inv.tasks)
    reported = offsets_json(scenario)
    for row in inv.partition_offsets_rows():
        name = f"{row['topic']}-{row['partition']}"
        expected = (reported[name]["high_watermark"], "offsets_file") if name in reported else (None, None)
        assert (row["high_watermark"], row["hw_source"]) == expected, name
    assert {s["kind"] for s in inv.segments} >= {"dump_log", "kafka_transactions_find_hanging", "offsets_json", "text"}
    assert {s["skip_reason"] for s in inv.segments if s["kind"] != "text"} == {None}


def test_kafka_transactions_outputs_become_reported_rows() -> None:
    scenario = "hanging-unadded-partition"
    inv = discover(scenario_dir(scenario) / "tools", "text")
    by_tool: dict[str, list[dict[str, object]]] = {}
    for row in inv.reported:
        by_tool.setdefault(str(row["tool"]), []).append(row)
    (hanging,) = by_tool["find-hanging"]
    found = expected_json(scenario)["find_hanging"]["rows"][0]
    assert (hanging["topic"], hanging["partition"], hanging["producer_id"], hanging["start_offset"]) == (
        found["Topic"], int(found["Partition"]), int(found["ProducerId"]), int(found["StartOffset"]))
    assert (hanging["broker_id"], hanging["max_transaction_timeout_ms"]) == (1, 60_000)
    assert hanging["run_timestamp"] // 1000 == _tool_time(scenario, "find-hanging") // 1000
    (described,) = by_tool["describe"]
    assert (described["transactional_id"], described["state"]) == ("hang-txn", "CompleteCommit")
    producers = {(r["partition"], r["producer_id"]): r["start_offset"] for r in by_tool["describe-producers"]}
    assert producers[(1, 0)] == 0  # CurrentTransactionStartOffset of the stray batch on hang-1


def _tool_time(scenario: str, command: str) -> int:
    return next(c["at_ms"] for c in expected_json(scenario)["tool_commands"] if command in c["command"])


def test_markers_dumped_without_their_records_close_transactions_as_unknown(tmp_path: Path) -> None:
    """kafka-dump-log without --deep-iteration prints batch lines only: every marker is still
    there (UNKNOWN type), and the file says why the types are missing."""
    source = scenario_dir("crashed-producer") / "tools" / "dump-log" / "crash-0.txt"
    lines = source.read_text().splitlines(keepends=True)
    (tmp_path / "crash-0.txt").write_text("".join(line for line in lines if not line.startswith("| ")))
    text = _raw(tmp_path, "text")
    full = _raw(source, "text")
    assert len(text["control_markers"]) == len(full["control_markers"]) > 0
    assert {m["marker_type"] for m in text["control_markers"]} == {"UNKNOWN"}
    assert [(m["offset"], m["producer_id"], m["timestamp"]) for m in text["control_markers"]] == [
        (m["offset"], m["producer_id"], m["timestamp"]) for m in full["control_markers"]]
    assert any("--deep-iteration" in i["detail"] for i in text["decode_issues"])


def _raw(dump: Path, kind: str) -> dict[str, list[dict[str, object]]]:
    inv = discover(dump, kind)
    out = TableRows()
    for task in inv.tasks:
        for _ in decode_task(task, out):
            pass
    tables: dict[str, list[dict[str, object]]] = {}
    for batch in out.drain():
        name = batch.column(0)[0].as_py()
        tables.setdefault(name, []).extend(batch.column(name).to_pylist())
    return tables


def _offsets_scenarios() -> list[CorpusScenario]:
    return [s for s in kafka_scenarios() if any((s.folder / "tools" / "dump-log").glob("__consumer_offsets-*.txt"))]


_OFFSETS = _offsets_scenarios()
#: offset_commits columns only the JSON form of --offsets-decoder (3.8+) prints
_OFFSETS_JSON_ONLY = ("key_version", "value_version", "leader_epoch", "commit_timestamp", "expire_timestamp")


@pytest.mark.parametrize("scenario", _OFFSETS, ids=[s.id for s in _OFFSETS])
def test_offset_commits_from_text_equal_binary(scenario: CorpusScenario) -> None:
    """The ``--offsets-decoder`` dumps of a real cluster give the binary path's ``offset_commits`` rows;
    the columns older tools do not print are null (the key version, a non-null column, -1)."""
    binary = _raw(scenario.folder / "logdirs", "logdirs").get("offset_commits", [])
    text: list[dict[str, object]] = []
    for dump in sorted((scenario.folder / "tools" / "dump-log").glob("__consumer_offsets-*.txt")):
        rows = _raw(dump, "text")
        assert rows.get("decode_issues", []) == []
        text += rows.get("offset_commits", [])
    assert binary, "the scenario commits offsets"
    json_form = tuple(int(p) for p in scenario.version.split(".")[:2]) >= (3, 8)
    if not json_form:
        assert all(r["key_version"] == -1 for r in text)
        assert all(r[c] is None for r in text for c in _OFFSETS_JSON_ONLY[1:])
    skip = {"broker_id", "log_dir", "file"} | (set() if json_form else set(_OFFSETS_JSON_ONLY))

    def key(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return sorted(({k: v for k, v in r.items() if k not in skip} for r in rows), key=repr)

    assert key(text) == key(binary)


def test_lines_the_text_does_not_explain_are_one_issue_per_file_and_reason(tmp_path: Path) -> None:
    """A real dump with 1,600 lines no kafka-dump-log prints: one issue for them, with the count,
    the first line numbers and the text of the first, and every row the dump holds still read."""
    source = scenario_dir("crashed-producer") / "tools" / "dump-log" / "crash-0.txt"
    lines = source.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.startswith("baseOffset: ")) + 1
    junk = [f"garbage line {n} that no release of kafka-dump-log prints\n" for n in range(1_600)]
    (tmp_path / "crash-0.txt").write_text("".join(lines[:cut] + junk + lines[cut:]))
    text, full = _raw(tmp_path, "text"), _raw(source, "text")
    assert len(text["batches"]) == len(full["batches"]) > 0
    (garbage,) = [i for i in text["decode_issues"] if "garbage line" in str(i["detail"])]
    first = cut + 1
    assert garbage["position"] == first
    assert str(garbage["detail"]).startswith(f"1600 lines ({first}, {first + 1}, {first + 2} and 1597 more): ")
    assert "'garbage line 0 that no release" in str(garbage["detail"])
    assert (garbage["topic"], garbage["partition"]) == ("crash", 0)


def _metadata_scenarios() -> list[CorpusScenario]:
    return [s for s in kafka_scenarios()
            if (s.folder / "tools" / "dump-log" / "__cluster_metadata-0.txt").is_file()
            and (s.folder / "logdirs" / "__cluster_metadata-0").is_dir()]


_METADATA = _metadata_scenarios()


@pytest.mark.parametrize("scenario", _METADATA, ids=[s.id for s in _METADATA])
def test_the_metadata_logs_text_gives_the_binary_logs_configs_and_time(scenario: CorpusScenario) -> None:
    """A ``--cluster-metadata-decoder`` dump tells what the binary log does: the topics' configs,
    the cluster's defaults, the finalized feature levels, and the newest record's time."""
    binary = discover(scenario.folder / "logdirs", "logdirs")
    text = discover(scenario.folder / "tools" / "dump-log" / "__cluster_metadata-0.txt", "text")
    assert binary.metadata_configs.features, "the log sets metadata.version"
    assert text.metadata_configs == binary.metadata_configs
    assert text.copy_evidence().metadata_log_newest_ms == binary.copy_evidence().metadata_log_newest_ms is not None
    assert [i for i in text.issues if "metadata" in i["detail"]] == []


def test_metadata_lines_that_do_not_parse_are_one_issue(tmp_path: Path) -> None:
    """Damaged record lines of a metadata dump: one warning that counts them and says what may be
    missed, the other records still read."""
    (scenario,) = [s for s in _METADATA if s.id == "4.4.0/healthy"]
    lines = (scenario.folder / "tools" / "dump-log" / "__cluster_metadata-0.txt").read_text().splitlines(True)
    damaged = [line.replace('"featureLevel"', '"featureLevle"') if "transaction.version" in line else line
               for line in lines]
    assert damaged != lines
    (tmp_path / "__cluster_metadata-0.txt").write_text("".join(damaged))
    whole = discover(scenario.folder / "tools" / "dump-log" / "__cluster_metadata-0.txt", "text")
    inv = discover(tmp_path, "text")
    (issue,) = [i for i in inv.issues if "metadata" in i["detail"]]
    assert issue["severity"] == "warning" and "record lines of the KRaft or remote log metadata" in issue["detail"]
    assert "transaction.version" not in inv.metadata_configs.features
    assert inv.metadata_configs.metadata_version == whole.metadata_configs.metadata_version is not None


def _tiered_scenarios() -> list[CorpusScenario]:
    return [s for s in kafka_scenarios() if "tiered_offsets" in s.expected]


_TIERED = _tiered_scenarios()


@pytest.mark.parametrize("scenario", _TIERED, ids=[s.id for s in _TIERED])
def test_remote_segments_from_text_and_binary_are_the_brokers(scenario: CorpusScenario) -> None:
    """The remote log metadata topic's copies, binary or as ``--remote-log-metadata-decoder``
    printed them, give the same remote segments; those whose copy finished cover each tiered
    partition from its log start to the offset the broker reports as the latest tiered one."""
    binary = discover(scenario.folder / "logdirs", "logdirs").remote_segment_rows()
    text = discover(scenario.folder / "tools" / "dump-log", "text").remote_segment_rows()

    def plain(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return sorted(({k: v for k, v in r.items() if k not in ("broker_id", "log_dir", "txn_index_empty")}
                       for r in rows), key=repr)

    assert binary and plain(text) == plain(binary)
    for name, offsets in scenario.expected["tiered_offsets"].items():
        finished = sorted((r["start_offset"], r["end_offset"]) for r in binary
                          if f"{r['topic']}-{r['partition']}" == name and r["state"] == "COPY_SEGMENT_FINISHED")
        assert finished[0][0] == offsets["log_start_offset"], name
        assert finished[-1][1] == offsets["latest_tiered"], name
        assert all(b[0] == a[1] + 1 for a, b in zip(finished, finished[1:], strict=False)), name
