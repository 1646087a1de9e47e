"""Access to the real-broker corpus in ``../shared/realcorpus`` and a reader of its tool output.

The corpus is read in place (never copied into the repo). ``kafka-dump-log`` text is parsed
here with a deliberately small, independent parser so that the decoders under test are
compared with what Kafka's own tool printed, not with themselves.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REALCORPUS = Path(
    os.environ.get("TXN_AUDIT_REALCORPUS", Path(__file__).resolve().parents[1] / ".." / "shared" / "realcorpus")
).resolve()

SCENARIOS = sorted(p.name for p in REALCORPUS.iterdir() if (p / "logdirs").is_dir()) if REALCORPUS.is_dir() else []

needs_corpus = pytest.mark.skipif(not SCENARIOS, reason=f"real corpus not found at {REALCORPUS}")

_PAIR = re.compile(r"(\w+): (\S+)")


def scenario_dir(name: str) -> Path:
    return REALCORPUS / name


def offsets_json(name: str) -> dict[str, Any]:
    return json.loads((REALCORPUS / name / "tools" / "offsets.json").read_text())


def expected_json(name: str) -> dict[str, Any]:
    return json.loads((REALCORPUS / name / "expected.json").read_text())


@dataclass
class DumpedBatch:
    fields: dict[str, str]
    records: list[dict[str, str]] = field(default_factory=list)


@dataclass
class DumpedFile:
    """One ``Dumping <path>`` section of kafka-dump-log output."""

    path: str  # as printed, relative to the scenario folder (``logdirs/<partition>/<file>``)
    batches: list[DumpedBatch] = field(default_factory=list)
    lines: list[dict[str, str]] = field(default_factory=list)  # snapshot / txnindex entries


def _pairs(line: str) -> dict[str, str]:
    """``key: value`` pairs of a line, stopping before free-text ``key:``/``payload:`` parts."""
    cut = len(line)
    for marker in (" key: ", " payload: "):
        i = line.find(marker)
        if i != -1:
            cut = min(cut, i)
    out = dict(_PAIR.findall(line[:cut]))
    rest = line[cut:]
    if rest:
        m = re.match(r" key: (.*?)(?: payload: (.*))?$", rest)
        if m:
            out["key"] = m.group(1)
            if m.group(2) is not None:
                out["payload"] = m.group(2)
        elif rest.startswith(" payload: "):
            out["payload"] = rest[len(" payload: ") :]
    return out


def parse_dump_log(text: str) -> list[DumpedFile]:
    files: list[DumpedFile] = []
    current: DumpedFile | None = None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("Dumping "):
            current = DumpedFile(path=line[len("Dumping ") :].strip())
            files.append(current)
            continue
        if current is None or line.startswith("Log starting offset") or line.startswith("Starting offset"):
            continue
        if line.startswith("| "):
            current.batches[-1].records.append(_pairs(line[1:]))
        elif line.startswith("baseOffset: "):
            current.batches.append(DumpedBatch(fields=_pairs(line)))
        else:
            current.lines.append(_pairs(line))
    return files


def dump_log(scenario: str, partition_dir: str) -> list[DumpedFile]:
    path = REALCORPUS / scenario / "tools" / "dump-log" / f"{partition_dir}.txt"
    return parse_dump_log(path.read_text())


def dumped_partitions(scenario: str) -> list[str]:
    return sorted(p.stem for p in (REALCORPUS / scenario / "tools" / "dump-log").glob("*.txt"))
