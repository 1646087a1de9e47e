"""Small raw tables written by hand, for unit tests of the reconstruction and detection rules."""

from __future__ import annotations

import tempfile

from dataclasses import dataclass, field
from typing import Any

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from txn_audit.manifest import describe_tables
from txn_audit.schemas import RAW_TABLES, declared, in_ms, read_ms, replicas_metadata, row_replicas
from txn_audit.tables import load_raw_tables


@dataclass
class RawBuilder:
    """Appends rows the way a single broker (id 1) would have written them."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in RAW_TABLES})
    next_offset: dict[tuple[str, int], int] = field(default_factory=dict)
    hw: dict[tuple[str, int], int] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    cleaned: dict[tuple[str, int], int] = field(default_factory=dict)
    policies: dict[str, str] = field(default_factory=dict)

    def _replica(self, topic: str, partition: int) -> dict[str, Any]:
        return {"broker_id": 1, "log_dir": "ld", "topic": topic, "partition": partition}

    def batch(
        self, topic: str, partition: int, *, pid: int = -1, epoch: int = -1, seq: int = -1, count: int = 1,
        ts: int, txn: bool = False,
    ) -> int:
        key = (topic, partition)
        base = self.next_offset.get(key, 0)
        self.next_offset[key] = base + count
        self.rows["batches"].append({
            **self._replica(topic, partition), "segment_base_offset": 0, "position": base * 100,
            "base_offset": base, "last_offset": base + count - 1, "magic": 2, "codec": "none",
            "timestamp_type": "CreateTime", "is_transactional": txn, "is_control": False, "producer_id": pid,
            "producer_epoch": epoch, "base_sequence": seq, "last_sequence": seq + count - 1 if seq >= 0 else -1,
            "record_count": count, "first_timestamp": ts, "max_timestamp": ts, "delete_horizon_timestamp": -1,
            "partition_leader_epoch": 0, "stored_crc": 1, "computed_crc": 1, "crc_ok": True, "size_bytes": 100,
            "file": f"ld/{topic}-{partition}/00000000000000000000.log",
        })
        return base

    def removed(self, topic: str, partition: int, count: int) -> None:
        """``count`` offsets no batch holds any more (the log cleaner dropped their batches)."""
        key = (topic, partition)
        self.next_offset[key] = self.next_offset.get(key, 0) + count

    def marker(self, topic: str, partition: int, *, pid: int, epoch: int, kind: str, ts: int,
               coordinator_epoch: int = 0) -> int:
        key = (topic, partition)
        offset = self.next_offset.get(key, 0)
        self.next_offset[key] = offset + 1
        common = {**self._replica(topic, partition), "producer_id": pid, "producer_epoch": epoch}
        file = f"ld/{topic}-{partition}/00000000000000000000.log"
        self.rows["batches"].append({
            **common, "segment_base_offset": 0, "position": offset * 100, "base_offset": offset,
            "last_offset": offset, "magic": 2, "codec": "none", "timestamp_type": "CreateTime",
            "is_transactional": True, "is_control": True, "base_sequence": -1, "last_sequence": -1,
            "record_count": 1, "first_timestamp": ts, "max_timestamp": ts, "delete_horizon_timestamp": -1,
            "partition_leader_epoch": 0, "stored_crc": 1, "computed_crc": 1, "crc_ok": True, "size_bytes": 78,
            "file": file,
        })
        self.rows["control_markers"].append({
            **common, "offset": offset, "marker_type": kind, "control_type": 1 if kind == "COMMIT" else 0,
            "coordinator_epoch": coordinator_epoch, "timestamp": ts, "key_version": 0, "value_version": 0,
            "segment_base_offset": 0, "position": offset * 100, "file": file,
        })
        return offset

    def coordinator(self, tid: str, *, pid: int, epoch: int, state: str, partitions: list[tuple[str, int]] | None,
                    ts: int, start: int = -1, timeout_ms: int = 60_000, log_partition: int = 0,
                    version: int | None = 0) -> None:
        """A ``__transaction_state`` record (of partition ``log_partition``; ``version``: its
        client transaction version)."""
        codes = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4,
                 "CompleteAbort": 5}
        self._coordinator_record(tid, ts=ts, log_partition=log_partition, value={
            "value_version": 0, "tombstone": False, "producer_id": pid, "producer_epoch": epoch,
            "previous_producer_id": -1, "next_producer_id": -1, "next_producer_epoch": -1,
            "txn_timeout_ms": timeout_ms, "state_code": codes[state], "state": state,
            "topic_partitions": None if partitions is None else [{"topic": t, "partition": p} for t, p in partitions],
            "txn_last_update_timestamp": ts, "txn_start_timestamp": start, "client_transaction_version": version,
        })

    def coordinator_tombstone(self, tid: str, *, ts: int, log_partition: int = 0) -> None:
        """A ``__transaction_state`` tombstone: the id expired (a record with no value)."""
        self._coordinator_record(tid, ts=ts, log_partition=log_partition, value={"tombstone": True})

    def _coordinator_record(self, tid: str, *, ts: int, log_partition: int, value: dict[str, Any]) -> None:
        key = ("__transaction_state", log_partition)
        offset = self.next_offset.get(key, 0)
        self.next_offset[key] = offset + 1
        empty = {name: None for name in RAW_TABLES["txn_log"].names}
        self.rows["txn_log"].append(empty | {
            **self._replica("__transaction_state", log_partition), "offset": offset, "record_timestamp": ts,
            "transactional_id": tid, "key_version": 0, "segment_base_offset": 0,
            "file": f"ld/__transaction_state-{log_partition}/00000000000000000000.log",
        } | value)

    def snapshot(self, topic: str, partition: int, *, at: int, pid: int, epoch: int, open_from: int = -1,
                 ts: int) -> None:
        """A producer-state snapshot taken at offset ``at``: the producer's transaction is open
        from ``open_from`` (-1: none open)."""
        self.rows["producer_snapshots"].append({
            **self._replica(topic, partition), "snapshot_offset": at, "producer_id": pid, "producer_epoch": epoch,
            "last_sequence": 0, "last_offset": max(at - 1, 0), "offset_delta": 0, "timestamp": ts,
            "coordinator_epoch": 0, "current_txn_first_offset": open_from, "crc_ok": True,
            "file": f"ld/{topic}-{partition}/{at:020d}.snapshot",
        })

    def compacted(self, topic: str, partition: int, *, cleaned_to: int | None, policy: str | None = "compact") -> None:
        """The topic's cleanup policy (None: not known) and how far the cleaner compacted the
        partition (its cleaner-offset-checkpoint entry; None: not listed)."""
        if policy is not None:
            self.policies[topic] = policy
        if cleaned_to is not None:
            self.cleaned[(topic, partition)] = cleaned_to

    def find_hanging(self, file: str, *, run_at: int | None, timeout_min: int | None,
                     rows: list[tuple[str, int, int, int, int, int]] = ()) -> None:  # type: ignore[assignment]
        """A find-hanging output: rows of (topic, partition, pid, epoch, start offset, last timestamp)."""
        base = {"file": file, "tool": "find-hanging", "run_timestamp": run_at, "broker_id": 1,
                "max_transaction_timeout_ms": None if timeout_min is None else timeout_min * 60_000,
                "command": "kafka-transactions.sh find-hanging"}
        if not rows:
            self.rows["reported_transactions"].append(dict(base))
        for n, (topic, partition, pid, epoch, start, last) in enumerate(rows, 2):
            self.rows["reported_transactions"].append({
                **base, "line": n, "topic": topic, "partition": partition, "producer_id": pid, "producer_epoch": epoch,
                "coordinator_epoch": -1, "start_offset": start, "last_timestamp": last,
                "duration_ms": None if run_at is None else (run_at - last) // 60_000 * 60_000,
            })

    def arrow_tables(self) -> dict[str, pa.Table]:
        offsets = []
        for (topic, partition), end in sorted(self.next_offset.items()):
            offsets.append({
                **self._replica(topic, partition), "replica_status": "live", "topic_id": None,
                "high_watermark": self.hw.get((topic, partition), end), "recovery_point": end,
                "log_start_offset_checkpoint": None, "cleaner_offset": self.cleaned.get((topic, partition)),
                "cleanup_policy": self.policies.get(topic), "first_segment_base_offset": 0,
                "log_start_offset": self.log_start.get((topic, partition), 0), "live_segments": 1,
                "clean_shutdown": True,
            })
        self.rows["partition_offsets"] = offsets
        # typed as ingest writes them: instants from epoch ms, -1 null
        return {name: declared(pa.Table.from_pylist(rows, schema=in_ms(RAW_TABLES[name])), RAW_TABLES[name])
                for name, rows in self.rows.items()}

    def tables(self, spark: Any) -> dict[str, Any]:
        """The tables as frames, instants as epoch ms, as the scan reads them (``tables.load_table``)."""
        return {name: spark.createDataFrame(read_ms(table)) for name, table in self.arrow_tables().items()}

    def write(self, folder: Path) -> None:
        """The tables as ingest writes them: a Parquet file each, a row group per replica's run,
        whose footer lists its rows' replicas, and the ledger of them beside them."""
        from txn_audit.ingest.worker import replica_runs
        from txn_audit.schemas import REPLICA_COLUMNS

        for name, table in self.arrow_tables().items():
            (folder / name).mkdir(parents=True)
            if not set(REPLICA_COLUMNS) <= set(table.column_names):  # a table of no replica
                pq.write_table(table, folder / name / "part-00000.parquet")
                continue
            listed = table.schema.with_metadata(replicas_metadata(row_replicas(table)))
            with pq.ParquetWriter(folder / name / "part-00000.parquet", listed) as writer:
                for _replica, rows in replica_runs(table):  # a row group per replica's run, as ingest writes
                    writer.write_table(rows.cast(listed))
        from txn_audit.ledger import RAW, Entry, Ledger

        described = describe_tables(folder, RAW_TABLES).tables
        Ledger(str(folder.absolute()), "built", "built", {}, {},
               {name: Entry(files, "ingest", RAW) for name, files in described.items()}).save()


def run_rules(spark: Any, builder: RawBuilder, *, as_of_ms: int, timeout_ms: int = 60_000,
              tolerance_ms: int = 1_000, files: Path | None = None) -> list[dict[str, Any]]:
    """The findings on ``builder``'s tables, written as ingest writes them into ``files`` (an
    empty folder; None: a temporary one) and read back as a scan reads them, each derived table
    written there as a scan does."""
    from txn_audit.detect import write_detected
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import read_arrow_table
    from txn_audit.usage import AuditOptions

    with tempfile.TemporaryDirectory(prefix="rules-") as scratch:
        folder = Path(scratch) if files is None else files
        builder.write(folder / "tables")
        raw = load_raw_tables(spark, folder / "tables")
        recon = reconstruct(raw, as_of_ms=as_of_ms, late_tolerance_ms=tolerance_ms,
                            output=DerivedOutput(str(folder / "tables")))
        opts = AuditOptions(as_of_ms=as_of_ms, max_transaction_timeout_ms=timeout_ms, late_tolerance_ms=tolerance_ms)
        write_detected(raw, recon, opts, folder / "tables" / "findings")
        found: list[dict[str, Any]] = read_arrow_table(folder / "tables", "findings").to_pylist()
        return found


def rank(raw: Any, as_of_ms: int | None = None) -> Any:
    """``reconstruct.ranked_replicas`` of raw tables (``tables.RawTables``), as reconstruct ranks them."""
    from txn_audit.reconstruct import ranked_replicas

    return ranked_replicas(raw["partition_offsets"], offsets_files=raw.files("partition_offsets"),
                           metadata_files=raw.files("metadata_partitions"), batch_files=raw.files("batches"),
                           as_of_ms=as_of_ms)
