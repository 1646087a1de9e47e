"""``txn-audit sample``: write a small, realistic dump with planted anomalies and a manifest."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import uuid
from pathlib import Path
from typing import Any

from txn_audit.errors import UsageError
from txn_audit.formats.record_batch import RECORDS_OFFSET
from txn_audit.sample.scenario import Cluster, simulate

__all__ = ["write_sample", "MANIFEST_NAME"]

MANIFEST_NAME = "manifest.json"
GENERATOR_VERSION = 1


def _crash_effects(cluster: Cluster) -> None:
    """Broker 2 died uncleanly: a torn last batch in clicks-1, and one batch with a flipped bit."""
    clicks = cluster.log("clicks-1")
    victim = next(a for a in clicks.appends[5:] if a.segment_base_offset == clicks.segments[0].base_offset)
    clicks.corrupt_positions.append((victim.segment_base_offset, victim.position + RECORDS_OFFSET + 7))
    cluster.anomalies.append({
        "kind": "corrupt_batch", "expected_findings": ["corrupt_batch"], "topic": "clicks", "partition": 1,
        "first_offset": victim.base_offset, "last_offset": victim.last_offset,
        "segment_base_offset": victim.segment_base_offset, "position": victim.position,
        "note": "one bit flipped inside the records of a rolled segment: the batch CRC no longer matches",
    })
    torn = clicks.appends[-1]
    clicks.truncate_tail_bytes = torn.size - 25
    cluster.brokers[2].high_watermarks["clicks-1"] = torn.base_offset
    cluster.anomalies.append({
        "kind": "truncated_segment", "expected_findings": ["truncated_segment"], "topic": "clicks", "partition": 1,
        "first_offset": torn.base_offset, "last_offset": torn.last_offset,
        "segment_base_offset": torn.segment_base_offset, "position": torn.position,
        "note": "broker 2 crashed mid-append: only the first 25 bytes of the last batch reached the disk",
    })


def _max_timestamp(cluster: Cluster) -> int:
    return max(seg.max_timestamp for log in cluster.logs.values() for seg in log.segments)


def write_sample(out: str | os.PathLike[str], *, seed: int = 7, force: bool = False) -> dict[str, Any]:
    """Write the sample dump to ``out`` (``broker-1/``, ``broker-2/``, ``manifest.json``) atomically."""
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a folder")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise UsageError(f"{target} is not empty; pass --force to replace it")
    cluster = simulate(seed)
    _crash_effects(cluster)
    rng_ids = random.Random(seed * 7919)
    topics = sorted({log.topic for log in cluster.logs.values()})
    topic_ids = {t: base64.urlsafe_b64encode(rng_ids.randbytes(16)).decode().rstrip("=") for t in topics}

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex}"
    try:
        for node_id, broker in sorted(cluster.brokers.items()):
            broker.write(staging / f"broker-{node_id}", topic_ids)
        manifest = _manifest(cluster, seed)
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if target.exists():
            trash = target.parent / f".{target.name}.old-{uuid.uuid4().hex}"
            os.replace(target, trash)
            os.replace(staging, target)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _manifest(cluster: Cluster, seed: int) -> dict[str, Any]:
    partitions = []
    for node_id, broker in sorted(cluster.brokers.items()):
        for name, log in sorted(broker.logs.items()):
            hw = broker.high_watermarks.get(name, log.next_offset)
            partitions.append({
                "broker_id": node_id, "topic": log.topic, "partition": log.partition,
                "log_end_offset": log.next_offset, "high_watermark": hw,
                "last_stable_offset": log.last_stable_offset(hw), "segments": len(log.segments),
            })
    return {
        "generator": "txn-audit sample", "generator_version": GENERATOR_VERSION, "seed": seed,
        "as_of_ms": _max_timestamp(cluster),
        "brokers": [{"node_id": n, "log_dir": f"broker-{n}", "clean_shutdown": b.clean_shutdown}
                    for n, b in sorted(cluster.brokers.items())],
        "partitions": partitions,
        "transactional_ids": cluster.transactional_ids,
        "anomalies": cluster.anomalies,
    }
