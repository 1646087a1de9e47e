"""The rules of a partition's status, computed on the driver with pyarrow (no pyspark here):
``stuck_lso`` (the last stable offset behind the high watermark), the chosen copy's high
watermark beyond its own log end (an ``invariant_violation``) and ``replica_divergence`` (a copy
that differs from the copy audited).

Their rows are ``partition_stability``'s and ``replica_stability``'s: one per partition and one
per copy, read whole from the derived tables' files (``Reconstruction.rows``). Everything they
say is in those rows, the culprit's first offset included (``reconstruct.stability``), so no
transaction row is read. As Spark queries they cost a plan and a job each, on every dump.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.offset_ranges import uncovered
from txn_audit.detect.words import (
    describe_topic_command,
    duration_text,
    finding_row,
    offsets_text,
    partition_name,
    rows_where,
    time_text,
)
from txn_audit.reconstruct.divergence import AHEAD, BEHIND, CONFLICT
from txn_audit.formats.layout import REMOTE_LOG_METADATA_TOPIC
from txn_audit.schemas import FINDINGS, HW_CAPPED, in_ms
from txn_audit.severity import Severity

__all__ = ["DIVERGENCE_SEVERITY", "HW_SOURCE_TEXT", "REMOTE_COPIED", "capped_partitions", "divergent_copies",
           "held_partitions", "hw_beyond_log_end_findings", "remote_only_findings",
           "replica_divergence_findings", "stability_findings", "stuck_lso_findings"]

#: where the high watermark a stuck LSO is measured against comes from (``hw_source``)
HW_SOURCE_TEXT = {
    "checkpoint": "from replication-offset-checkpoint",
    "offsets_file": "as the offsets file beside the dump reports it",
    HW_CAPPED: "the replica's log end: its checkpoint says more than its log holds",
}
#: what the high watermark's source is called when the dump holds none (``hw_source`` log_end)
NO_HW_TEXT = ("unknown: the dump holds no high watermark (no replication-offset-checkpoint entry, no offsets file), "
              "so the log end offset stands in for it and part of the gap may be records not yet replicated")
DIVERGENCE_SEVERITY = {CONFLICT: Severity.CRITICAL, BEHIND: Severity.WARNING, AHEAD: Severity.INFO}


def held_partitions(stability: pa.Table) -> list[dict[str, Any]]:
    """The partitions whose LSO is behind their HW: every ``stuck_lso_findings`` row is of one."""
    return rows_where(stability, stability.column("lso_below_hw"))


def capped_partitions(stability: pa.Table) -> list[dict[str, Any]]:
    """The partitions whose checkpointed HW lies beyond the chosen copy's log end: every
    ``hw_beyond_log_end_findings`` row is of one."""
    return rows_where(stability, pc.equal(stability.column("hw_source"), HW_CAPPED))


def divergent_copies(replica_stability: pa.Table) -> list[dict[str, Any]]:
    """The copies that differ from the chosen copy: every ``replica_divergence_findings`` row is of one."""
    return rows_where(replica_stability, pc.is_valid(replica_stability.column("divergence")))


def stuck_lso_findings(stability: pa.Table, compacted: Collection[tuple[str, int]] = ()) -> list[dict[str, Any]]:
    """LSO behind the HW. Without a known HW the log end stands in for it: the finding is then
    info and says that the gap may be records not yet replicated rather than a stuck LSO. On a
    ``compacted`` partition (topic, partition) it says what else it costs: the log cleaner never
    cleans past the LSO (its first uncleanable offset is at most the first unstable one), so what
    was written since stays uncompacted while the transaction holds.

    The transaction holding the LSO is the culprit's (``culprit_first_offset``): it may start
    below the log start (a producer snapshot's transaction whose records retention deleted),
    where the LSO itself stays."""
    found = []
    for held in held_partitions(stability):
        lso, hw = held["last_stable_offset"], held["effective_high_watermark"]
        open_from = held["culprit_first_offset"] if held["culprit_first_offset"] is not None else lso
        start = held["log_start_offset"]
        below_start = ""
        if start is not None and open_from < start:
            below_start = (f", below the log start offset {start} (its first records were deleted under it, by "
                           "retention or kafka-delete-records.sh; the LSO stays at the log start)")
        since = held["held_since_timestamp"]
        when = "at a time the dump does not tell" if since is None else (
            f"since {time_text(since)} ({duration_text(held['held_ms'])})")
        culprit = held["culprit_producer_id"]
        tid = held["culprit_transactional_id"]
        by = "a producer the dump does not tell" if culprit is None else (
            f"producer {culprit}" + ("" if tid is None else f" ({tid})"))
        evidence = (
            f"last stable offset {lso} is {hw - lso} offsets behind the high watermark {hw} "
            f"({HW_SOURCE_TEXT.get(held['hw_source'], NO_HW_TEXT)}): {held['held_records']} records "
            f"({held['held_bytes']} bytes) are held back from read_committed consumers {when} by {by}, whose "
            f"transaction is open from offset {open_from}{below_start}"
        )
        if (held["topic"], held["partition"]) in compacted:
            evidence += (f"; the topic is compacted, and the log cleaner does not clean past the LSO: those "
                         f"{held['held_bytes']} bytes, and every write after them, stay uncompacted while it holds")
        severity = Severity.INFO if held["hw_source"] == "log_end" else Severity.WARNING
        found.append(finding_row(
            held, "stuck_lso", severity, evidence,
            producer_id=culprit, producer_epoch=held["culprit_producer_epoch"], transactional_id=tid,
            first_offset=lso, last_offset=hw - 1, first_timestamp=since,
        ))
    return found


def hw_beyond_log_end_findings(stability: pa.Table) -> list[dict[str, Any]]:
    """The chosen copy's checkpointed HW lies beyond its own log end: an invariant of every
    replica broken. The audit caps the HW at the log end (``reconstruct.stability``)."""
    found = []
    for capped in capped_partitions(stability):
        end, checkpointed = capped["log_end_offset"], capped["checkpoint_high_watermark"]
        evidence = (
            f"the dump gives {capped['chosen_replica']}'s copy of "
            f"{partition_name(capped['topic'], capped['partition'])} a high watermark of {checkpointed} (its "
            f"checkpoint, or the offsets file beside a text dump), beyond the end of its log at {end}: the log lost "
            "its tail after the high watermark was recorded (a copy cut short, or a crash before the flush). No "
            f"replica's high watermark exceeds its log end: the audit uses {end} and reports nothing beyond it"
        )
        found.append(finding_row(capped, "invariant_violation", Severity.WARNING, evidence,
                                 first_offset=end, last_offset=checkpointed - 1))
    return found


def replica_divergence_findings(replica_stability: pa.Table, stability: pa.Table) -> list[dict[str, Any]]:
    """A copy of a partition that differs from the chosen copy (``reconstruct.divergence``):
    critical where the same offset holds different batches, warning where it lacks offsets below
    the chosen copy's HW, info where it holds more than the chosen copy (warning when the chosen
    copy's own HW says its log lost that tail)."""
    chosen = {(row["topic"], row["partition"]): row for row in stability.to_pylist()}
    found = []
    for copy in divergent_copies(replica_stability):
        audited = chosen.get((copy["topic"], copy["partition"]))
        if audited is None:  # a copy of a partition no copy speaks for: nothing to differ from
            continue
        me, them = copy["replica_name"], audited["chosen_replica"]
        name = partition_name(copy["topic"], copy["partition"])
        divergence, topic = copy["divergence"], copy["topic"]
        where = (f"{copy['divergent_offset']}: {me} holds {copy['replica_holds']}; {them}, the copy audited, holds "
                 f"{copy['chosen_holds']}")
        remediation, advice = None, ""
        if divergence == CONFLICT:
            told = f"the copies of {name} hold different batches from offset {where}"
            remediation = describe_topic_command(topic)
            advice = ("the command shows the leader and the ISR. A follower whose copy differs truncates to the "
                      "leader's log when it next fetches; one that stays out of the ISR needs its copy rebuilt (stop "
                      f"it, delete its {name} folder, let it replicate again)")
        elif divergence == BEHIND:
            told = (f"{me}'s copy of {name} ends at {copy['log_end_offset']}, below the high watermark "
                    f"{audited['high_watermark']} of {them}: it lacks records every in-sync replica holds (a follower "
                    f"that fell behind, or a copy cut short); at offset {where}")
            remediation = describe_topic_command(topic, under_replicated=True)
            advice = ("the command lists the topic's partitions still under-replicated: a running follower catches up "
                      "by itself; a copy taken from a stopped broker may only be older")
        else:
            told = f"{me}'s copy of {name} goes beyond the end of the copy audited ({them}): from offset {where}"
        capped = (f"; the dump gives it a high watermark of {copy['checkpoint_high_watermark']}, beyond its log end"
                  if copy["hw_source"] == HW_CAPPED else "")
        severity = DIVERGENCE_SEVERITY.get(divergence, Severity.INFO)
        if divergence not in (CONFLICT, BEHIND) and audited["hw_source"] == HW_CAPPED:
            severity = Severity.WARNING
        evidence = f"{told}{capped}. The audit reports {them}: {audited['replica_choice_reason']}"
        if advice:
            evidence += f"; {advice}"
        found.append(finding_row(copy, "replica_divergence", severity, evidence,
                                 first_offset=copy["divergent_offset"], remediation=remediation))
    return found


#: the remote segments' state in which their data is in the remote store
REMOTE_COPIED = "COPY_SEGMENT_FINISHED"


def remote_only_findings(stability: pa.Table, local_starts: pa.Table | None,
                         remote: pa.Table | None = None) -> list[dict[str, Any]]:
    """Offsets of the audited copy that live only in the tiered storage's remote store (KIP-405):
    its log start offset (the log-start-offset-checkpoint: the whole log's) lies below its first
    local segment, and the segments between were copied to the remote store and deleted
    locally (``local.retention.*``). Not examined. The broker copies only segments that end below
    the LSO (``RemoteLogManager``: up to the last stable offset), so no transaction still open
    starts in that range. Only in a dump of a cluster that tiers (it holds the remote log
    metadata topic's partitions): elsewhere a copy that lacks its first segments is damaged, not
    tiered. ``local_starts``: ``partition_offsets``' ``LOCAL_START_COLUMNS``; ``remote``: the
    ``remote_segments`` rows, which name the segments that hold the range. Where they list copied
    segments of the partition but not for every offset of the range, the offsets in none are
    neither local nor known to be remote: a warning."""
    if local_starts is None or REMOTE_LOG_METADATA_TOPIC not in local_starts.column("topic").to_pylist():
        return []
    first_local = {(r["topic"], r["partition"], r["broker_id"], r["log_dir"]): r["first_segment_base_offset"]
                   for r in local_starts.to_pylist()}
    copied: dict[tuple[str, int], dict[str, tuple[int, int]]] = {}  # partition -> segment id -> offsets
    for r in [] if remote is None else remote.to_pylist():
        if r["state"] == REMOTE_COPIED:
            copied.setdefault((r["topic"], r["partition"]), {})[r["segment_id"]] = (r["start_offset"], r["end_offset"])
    found = []
    for row in stability.to_pylist():
        start = row["log_start_offset"]
        local = first_local.get((row["topic"], row["partition"], row["broker_id"], row["log_dir"]))
        if start is None or local is None or local <= start:
            continue
        name = partition_name(row["topic"], row["partition"])
        segments = list(copied.get((row["topic"], row["partition"]), {}).values())
        held = [(a, b) for a, b in segments if b >= start and a < local]
        if held:
            listed = (f"; the remote log metadata lists {len(held)} copied segment{'s' if len(held) > 1 else ''} "
                      f"holding {offsets_text(min(a for a, _ in held), max(b for _, b in held))}")
        else:
            listed = "; the remote log metadata in the dump lists no copied segment of them"
        evidence = (f"{offsets_text(start, local - 1)} of {name} live only in the tiered storage's remote store (its "
                    f"log start offset is {start}, its first local segment starts at {local}){listed}: they were not "
                    "examined; the broker copies only segments that end below the last stable offset, so no open "
                    "transaction starts there")
        found.append(finding_row(row, "remote_only_range", Severity.INFO, evidence, first_offset=start,
                                 last_offset=local - 1))
        if not segments:
            continue  # the metadata partition that lists them is not in the dump
        for first, last in uncovered(segments, start, local - 1):
            evidence = (f"{offsets_text(first, last)} of {name} are below its first local segment ({local}) and "
                        f"above its log start offset ({start}), but in no segment the remote log metadata lists as "
                        "copied to the remote store: the remote store may have lost them, or the copy of the "
                        "metadata in the dump is behind the broker's")
            found.append(finding_row(row, "remote_range_unlisted", Severity.WARNING, evidence, first_offset=first,
                                     last_offset=last))
    return found


def stability_findings(stability: pa.Table, replica_stability: pa.Table,
                       compacted: Collection[tuple[str, int]] = (), local_starts: pa.Table | None = None,
                       remote: pa.Table | None = None) -> pa.Table:
    """Every finding of the rules of this module, as a ``FINDINGS`` table (no row: none);
    ``compacted``: as ``stuck_lso_findings`` reads it, ``local_starts`` and ``remote``: as
    ``remote_only_findings``."""
    rows = [*stuck_lso_findings(stability, compacted), *hw_beyond_log_end_findings(stability),
            *remote_only_findings(stability, local_starts, remote),
            *replica_divergence_findings(replica_stability, stability)]
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
