"""A plain, row-by-row reading of producer rows in offset order: the oracle of the ordered pass."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

COMPACTED = ("__consumer_offsets", "__transaction_state")
TOLERANCE_MS = 1_000
#: what identifies a row of the pass
KEY_FIELDS = ("topic", "partition", "producer_id", "offset", "is_marker")


def walk(rows: list[dict[str, Any]]) -> tuple[dict[tuple[Any, ...], dict[str, Any]], dict[tuple[Any, ...], int]]:
    """Walk each producer's rows on a partition in offset order, keeping what came before.
    Also gives each producer's last transactional write per partition."""
    by_producer: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_producer[(row["topic"], row["partition"], row["producer_id"])].append(row)
    out, last_writes = {}, {}
    for key, events in by_producer.items():
        events.sort(key=lambda r: r["offset"])
        last_txn_ts = next((r["max_timestamp"] for r in reversed(events) if r["is_transactional"]), None)
        if last_txn_ts is not None:
            last_writes[key] = last_txn_ts
        markers = 0
        marker = seq = None
        max_data = max_marker = max_coord = None
        for r in events:
            with_seq = (not r["is_marker"] and r["base_sequence"] is not None and r["base_sequence"] >= 0
                        and r["topic"] not in COMPACTED)
            late = (not r["is_marker"] and r["is_transactional"] and marker is not None
                    and (marker["max_timestamp"] - r["max_timestamp"] > TOLERANCE_MS or r["epoch"] < marker["epoch"]))
            out[(*key, r["offset"], r["is_marker"])] = {
                "txn_seq": markers,
                "prev_marker_offset": marker and marker["offset"],
                "prev_marker_type": marker and marker["marker_type"],
                "prev_marker_timestamp": marker and marker["max_timestamp"],
                "prev_marker_epoch": marker and marker["epoch"],
                "prev_seq_epoch": seq["epoch"] if with_seq and seq else None,
                "prev_seq_last_sequence": seq["last_sequence"] if with_seq and seq else None,
                "prev_seq_last_offset": seq["last_offset"] if with_seq and seq else None,
                "max_data_epoch_before": max_data,
                "max_marker_epoch_before": max_marker,
                "max_coordinator_epoch_before": max_coord,
                "is_late": late,
            }
            if r["is_marker"]:
                markers += 1
                marker = r
                max_marker = r["epoch"] if max_marker is None else max(max_marker, r["epoch"])
                if r["coordinator_epoch"] is not None:
                    max_coord = r["coordinator_epoch"] if max_coord is None else max(max_coord, r["coordinator_epoch"])
            else:
                max_data = r["epoch"] if max_data is None else max(max_data, r["epoch"])
                if with_seq:
                    seq = r
    return out, last_writes


def _named(marker_type: str | None) -> str | None:
    return None if marker_type is None else marker_type if marker_type in ("ABORT", "COMMIT") else "UNKNOWN"


def transactions(rows: list[dict[str, Any]], walked: dict[tuple[Any, ...], dict[str, Any]]) -> list[dict[str, Any]]:
    """Each producer's transactional rows on a partition grouped by how many markers precede them."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r["is_transactional"]:
            w = walked[tuple(r[k] for k in KEY_FIELDS)]
            groups.setdefault((r["topic"], r["partition"], r["producer_id"], w["txn_seq"]), []).append(r | w)
    out = []
    for (topic, partition, producer_id, txn_seq), events in groups.items():
        data = [e for e in events if not e["is_marker"]]
        marker = next((e for e in events if e["is_marker"]), None)
        late = [e["offset"] for e in data if e["is_late"]]
        out.append(dict(
            topic=topic, partition=partition, producer_id=producer_id, broker_id=events[0]["broker_id"],
            txn_seq=txn_seq,
            first_offset=min((e["offset"] for e in data), default=None),
            last_data_offset=max((e["last_offset"] for e in data), default=None),
            marker_offset=marker and marker["offset"], marker_type=marker and _named(marker["marker_type"]),
            marker_epoch=marker and marker["epoch"], marker_timestamp=marker and marker["max_timestamp"],
            coordinator_epoch=marker and marker["coordinator_epoch"],
            min_epoch=min((e["epoch"] for e in data), default=None),
            max_epoch=max((e["epoch"] for e in data), default=None),
            batches=len(data), records=sum(e["record_count"] for e in data), bytes=sum(e["size_bytes"] for e in data),
            first_timestamp=min((e["first_timestamp"] for e in data), default=None),
            last_timestamp=max((e["max_timestamp"] for e in data), default=None),
            late_batches=len(late), first_late_offset=min(late, default=None),
            prev_marker_offset=events[0]["prev_marker_offset"], prev_marker_type=_named(events[0]["prev_marker_type"]),
            prev_marker_timestamp=events[0]["prev_marker_timestamp"],
            last_event_timestamp=events[-1]["max_timestamp"],
        ))
    return out


def flagged(row: dict[str, Any]) -> bool:
    """What the rules look for: lateness, a sequence that does not continue, a lower epoch."""
    if row["is_late"]:
        return True
    epoch = row["epoch"]
    if row["prev_seq_epoch"] is not None:
        last = row["prev_seq_last_sequence"]
        expected = 0 if last == 2**31 - 1 else last + 1
        if not ((epoch == row["prev_seq_epoch"] and row["base_sequence"] == expected)
                or (epoch > row["prev_seq_epoch"] and row["base_sequence"] == 0)):
            return True
    seen = [e for e in (row["max_data_epoch_before"], row["max_marker_epoch_before"]) if e is not None]
    if seen and epoch < max(seen):
        return True
    return bool(row["is_marker"] and row["max_coordinator_epoch_before"] is not None
                and row["coordinator_epoch"] < row["max_coordinator_epoch_before"])
