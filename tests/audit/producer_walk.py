"""A plain, row-by-row reading of producer rows in offset order: the oracle of the ordered pass."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

COMPACTED = ("__consumer_offsets", "__transaction_state")
TOLERANCE_MS = 1_000


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
