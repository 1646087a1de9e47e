"""What discovery finds in a dump: log dirs, partition replicas, decode tasks and layout issues.

``discover`` fills an ``Inventory`` from broker log dirs, ``text.discover_text`` from text dumps;
the ingest job turns it into the ``segments``, ``partition_offsets`` and ``decode_issues`` rows
and into the ``FileTask`` list the workers decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from txn_audit.audit_time import CopyEvidence
from txn_audit.formats.cluster_metadata import TopicConfigs
from txn_audit.formats.layout import CLUSTER_METADATA_TOPIC
from txn_audit.formats.remote_log_metadata import RemoteLogRecord, remote_segments
from txn_audit.formats.model import OffsetCheckpoint
from txn_audit.ingest.storage import DumpLocation
from txn_audit.ingest.tasks import FileTask


@dataclass
class PartitionReplica:
    broker_id: int | None
    log_dir: str
    topic: str
    partition: int
    replica_status: str
    topic_id: str | None = None
    log_base_offsets: list[int] = field(default_factory=list)
    #: a high watermark from outside the log dir (an offsets file beside a text dump)
    reported_high_watermark: int | None = None
    #: a log start offset from an offsets file (a text dump has no log-start-offset-checkpoint)
    reported_log_start_offset: int | None = None
    #: the newest ``(leader_epoch, start_offset)`` of its leader-epoch-checkpoint, when it lists one
    leader_epoch: tuple[int, int] | None = None


@dataclass
class LogDir:
    path: str  # where it is, as printed (a local path or a URI)
    rel: str
    broker_id: int | None
    clean_shutdown: bool
    checkpoints: dict[str, OffsetCheckpoint] = field(default_factory=dict)


@dataclass
class Inventory:
    root: str  # the dump root: an absolute local path, or the URI of remote storage
    location: DumpLocation | None = None
    log_dirs: list[LogDir] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[PartitionReplica] = field(default_factory=list)
    tasks: list[FileTask] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    #: rows of the ``reported_transactions`` table (kafka-transactions.sh outputs beside a text dump)
    reported: list[dict[str, Any]] = field(default_factory=list)
    mtimes: dict[str, int | None] = field(default_factory=dict)  # by relative path, for the input fingerprint
    #: rows of the ``metadata_partitions`` table (the KRaft metadata logs' partition states)
    metadata_partitions: list[dict[str, Any]] = field(default_factory=list)
    #: the newest record of any copy of the KRaft metadata log (``cluster_metadata.newest_timestamp``)
    metadata_newest_ms: int | None = None
    #: the topics' configs and the feature levels, from the copy of the metadata log that reaches furthest
    metadata_configs: TopicConfigs = field(default_factory=lambda: TopicConfigs({}, {}))
    #: how far that copy reaches (its highest offset; -2: no copy read)
    metadata_configs_offset: int = -2

    #: each copy's (log dir's) remote log metadata records, in log order per partition of the topic
    remote_log_records: dict[tuple[int | None, str], list[RemoteLogRecord]] = field(default_factory=dict)

    def remote_segment_rows(self) -> list[dict[str, Any]]:
        """Rows of the ``remote_segments`` table: each copy's records replayed."""
        rows = []
        for (broker, log_dir), records in sorted(self.remote_log_records.items(), key=lambda kv: (kv[0][0] or -1,
                                                                                                  kv[0][1])):
            for segment in sorted(remote_segments(records).segments.values(),
                                  key=lambda s: (s.topic, s.partition, s.start_offset, s.segment_id)):
                rows.append({
                    "broker_id": broker, "log_dir": log_dir, "topic": segment.topic, "partition": segment.partition,
                    "topic_id": segment.topic_id, "segment_id": segment.segment_id,
                    "start_offset": segment.start_offset, "end_offset": segment.end_offset, "state": segment.state,
                    "segment_broker_id": segment.broker_id, "max_timestamp": segment.max_timestamp_ms,
                    "event_timestamp": segment.event_timestamp_ms, "size_bytes": segment.segment_size_bytes,
                    "txn_index_empty": segment.txn_index_empty,
                })
        return rows

    def read_metadata_copy(self, configs: TopicConfigs, last_offset: int, newest_ms: int | None) -> None:
        """Take what one copy of the KRaft metadata log (binary or text) says: its newest record
        dates the copy; its configs count if it reaches furthest of the copies read."""
        if newest_ms is not None:
            self.metadata_newest_ms = newest_ms if self.metadata_newest_ms is None else max(self.metadata_newest_ms,
                                                                                             newest_ms)
        if last_offset > self.metadata_configs_offset:
            self.metadata_configs, self.metadata_configs_offset = configs, last_offset

    def copy_evidence(self) -> CopyEvidence:
        """What the dump shows of when it was copied (``audit_time``): the metadata log's newest
        record, and the newest modification times of the data segments and of every file of the
        log dirs (none for a text dump: its files' times are no broker's)."""
        segments = [mtime for row in self.segments if row["kind"] == "log" and row["topic"] != CLUSTER_METADATA_TOPIC
                    and (mtime := self.mtimes.get(row["path"])) is not None]
        files = [mtime for mtime in self.mtimes.values() if mtime is not None]
        return CopyEvidence(
            metadata_log_newest_ms=self.metadata_newest_ms,
            newest_segment_mtime_ms=max(segments) // 1_000_000 if segments else None,
            newest_file_mtime_ms=max(files) // 1_000_000 if segments else None,
        )

    @property
    def storage(self) -> DumpLocation:
        assert self.location is not None, "an inventory built by discover() knows its storage"
        return self.location

    @property
    def input_bytes(self) -> int:
        """Bytes of every file the scan decodes (its tasks): what sizes the Spark session's work."""
        return sum(task.size_bytes for task in self.tasks)

    @property
    def brokers(self) -> list[int | None]:
        return sorted({d.broker_id for d in self.log_dirs}, key=lambda b: (b is None, b or 0))

    def partition_offsets_rows(self) -> list[dict[str, Any]]:
        """Rows of the ``partition_offsets`` table, one per partition replica."""
        by_dir = {d.rel: d for d in self.log_dirs}
        rows = []
        for r in self.replicas:
            ld = by_dir[r.log_dir]
            key = (r.topic, r.partition)

            def ckpt(name: str, ld: LogDir = ld, key: tuple[str, int] = key) -> int | None:
                c = ld.checkpoints.get(name)
                return None if c is None else c.entries.get(key)

            first = min(r.log_base_offsets) if r.log_base_offsets else None
            last = max(r.log_base_offsets) if r.log_base_offsets else None
            lso_ckpt = ckpt("log-start-offset-checkpoint")
            if lso_ckpt is None and r.reported_log_start_offset is not None:
                # the cluster's own log start (DeleteRecords moves it past the first segment's base)
                lso_ckpt = r.reported_log_start_offset
            hw, hw_source = ckpt("replication-offset-checkpoint"), "checkpoint"
            if hw is None:
                hw, hw_source = r.reported_high_watermark, "offsets_file"
            rows.append(
                {
                    "broker_id": r.broker_id,
                    "log_dir": r.log_dir,
                    "topic": r.topic,
                    "partition": r.partition,
                    "replica_status": r.replica_status,
                    "topic_id": r.topic_id,
                    "high_watermark": hw,
                    "hw_source": hw_source if hw is not None else None,
                    "recovery_point": ckpt("recovery-point-offset-checkpoint"),
                    "log_start_offset_checkpoint": lso_ckpt,
                    "cleaner_offset": ckpt("cleaner-offset-checkpoint"),
                    "cleanup_policy": self.metadata_configs.cleanup_policy(r.topic),
                    "metadata_version": self.metadata_configs.metadata_version,
                    "first_segment_base_offset": first,
                    "log_start_offset": lso_ckpt if lso_ckpt is not None else first,
                    "live_segments": len(r.log_base_offsets),
                    "last_segment_base_offset": last,
                    "clean_shutdown": ld.clean_shutdown,
                    "leader_epoch": None if r.leader_epoch is None else r.leader_epoch[0],
                    "leader_epoch_start_offset": None if r.leader_epoch is None else r.leader_epoch[1],
                }
            )
        return rows


def issue_row(
    broker: int | None, log_dir: str, topic: str | None, partition: int | None, file: str,
    kind: str, severity: str, detail: str, position: int | None = None,
) -> dict[str, Any]:
    """A ``decode_issues`` row about the layout of the dump (not about a file's contents)."""
    return {
        "broker_id": broker, "log_dir": log_dir, "topic": topic, "partition": partition, "file": file,
        "position": position, "kind": str(kind), "severity": str(severity), "detail": detail,
    }
