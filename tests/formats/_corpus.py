"""The real-corpus ``.log`` files that kafka-dump-log dumped, for the format tests."""

from __future__ import annotations

from pathlib import Path

from tests.realcorpus import SCENARIOS, DumpedFile, dump_log, dumped_partitions, scenario_dir


def dumped_log_files() -> list[tuple[str, DumpedFile]]:
    """(scenario, dumped section) for every dumped ``.log`` file that still exists on disk."""
    out = []
    for scenario in SCENARIOS:
        for partition in dumped_partitions(scenario):
            for dumped in dump_log(scenario, partition):
                if dumped.path.endswith(".log") and (scenario_dir(scenario) / dumped.path).is_file():
                    out.append((scenario, dumped))
    return out


def log_path(scenario: str, dumped: DumpedFile) -> Path:
    return scenario_dir(scenario) / dumped.path


def ids(cases: list[tuple[str, DumpedFile]]) -> list[str]:
    return [f"{s}:{d.path.removeprefix('logdirs/')}" for s, d in cases]
