"""The sample generator: deterministic, faithful to its manifest, and the bundled copy is current."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from txn_audit.formats.segment import iter_batches
from txn_audit.sample import write_sample

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "sample_data" / "dump"


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("sample") / "dump"
    return out, write_sample(out, seed=7)


def test_same_seed_same_bytes(sample: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = sample
    again = tmp_path / "again"
    write_sample(again, seed=7)
    assert _digest(out) == _digest(again)
    other = tmp_path / "other"
    write_sample(other, seed=8)
    assert _digest(out) != _digest(other)


def test_bundled_sample_is_what_the_generator_writes(sample: tuple[Path, dict[str, Any]]) -> None:
    out, _ = sample
    assert _digest(BUNDLED) == _digest(out), "sample_data/dump is stale: run `make sample`"


def test_sample_is_small_and_has_what_it_promises(sample: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = sample
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert size < 4 * 1024 * 1024
    kinds = {a["kind"] for a in manifest["anomalies"]}
    assert {"hanging_transaction", "late_arrival", "absorbed_late_record", "coordinator_stuck", "missing_marker",
            "open_transaction", "sequence_gap", "corrupt_batch", "truncated_segment"} <= kinds
    names = {p.name for p in out.rglob("*")}
    assert any(n.endswith(".txnindex") for n in names)
    assert any(n.endswith(".snapshot") for n in names)
    assert (out / "broker-1" / ".kafka_cleanshutdown").exists()
    assert not (out / "broker-2" / ".kafka_cleanshutdown").exists()
    rolled = [p for p in out.glob("broker-*/*/*.log") if not p.name.startswith("00000000000000000000")]
    assert rolled, "some partitions must have rolled segments"
    assert json.loads((out / "manifest.json").read_text()) == manifest


def test_every_codec_and_batch_kind_is_present(sample: tuple[Path, dict[str, Any]]) -> None:
    out, _ = sample
    codecs, kinds = set(), set()
    for path in out.glob("broker-*/*/*.log"):
        for item in iter_batches(path.read_bytes()):
            if hasattr(item, "compression"):
                codecs.add(item.compression)
                kinds.add("control" if item.is_control else "txn" if item.is_transactional
                          else "idempotent" if item.producer_id >= 0 else "plain")
    assert codecs == {0, 1, 2, 3, 4}
    assert kinds == {"control", "txn", "idempotent", "plain"}


def test_planted_damage_is_where_the_manifest_says(sample: tuple[Path, dict[str, Any]]) -> None:
    out, manifest = sample
    by_kind = {a["kind"]: a for a in manifest["anomalies"]}
    for kind, issue_kind in (("corrupt_batch", "crc_mismatch"), ("truncated_segment", "truncated_tail")):
        a = by_kind[kind]
        seg = out / "broker-2" / f"{a['topic']}-{a['partition']}" / f"{a['segment_base_offset']:020d}.log"
        issues = [i for i in iter_batches(seg.read_bytes()) if hasattr(i, "kind")]
        assert [(i.kind, i.position) for i in issues] == [(issue_kind, a["position"])]
