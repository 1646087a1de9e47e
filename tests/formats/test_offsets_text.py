"""Offsets files beside a text dump: kafka-get-offsets output and offsets JSON."""

from __future__ import annotations

import json

from tests.realcorpus import SCENARIOS, needs_corpus, offsets_json, scenario_dir
from txn_audit.formats.offsets_text import ReportedOffsets, parse_get_offsets, parse_offsets_json


@needs_corpus
def test_corpus_offsets_json_gives_every_partition() -> None:
    for scenario in SCENARIOS:
        text = (scenario_dir(scenario) / "tools" / "offsets.json").read_text()
        entries, issues = parse_offsets_json(text)
        assert issues == []
        expected = offsets_json(scenario)
        assert {f"{e.topic}-{e.partition}": e.high_watermark for e in entries} == {
            name: v["high_watermark"] for name, v in expected.items()
        }
        assert {f"{e.topic}-{e.partition}": e.last_stable_offset for e in entries} == {
            name: v["last_stable_offset"] for name, v in expected.items()
        }


def test_offsets_json_list_and_name_keys() -> None:
    doc = {"orders-3": {"high_watermark": 7}, "bad": {"high_watermark": 1}, "t-1": {"high_watermark": -1}}
    entries, issues = parse_offsets_json(json.dumps(doc))
    assert entries == [ReportedOffsets("orders", 3, 7)]
    assert len(issues) == 2 and all(i.kind == "unparsed_line" for i in issues)
    entries, issues = parse_offsets_json('[{"topic": "a-b", "partition": 0, "high_watermark": 3, '
                                         '"last_stable_offset": 2, "log_start_offset": true}]')
    assert entries == [ReportedOffsets("a-b", 0, 3, 2, None)] and issues == []


def test_offsets_json_syntax_error_names_the_line() -> None:
    entries, issues = parse_offsets_json('{\n  "t-0": {"high_watermark": 1},\n  oops\n}')
    assert entries == [] and [i.line for i in issues] == [3]


def test_get_offsets_lines() -> None:
    text = "# $ kafka-get-offsets.sh --bootstrap-server b:9092 --time -1\nhang:0:6\nhang:1:11\nhang:2:-1\njunk\n\n"
    entries, issues = parse_get_offsets(text)
    assert entries == [ReportedOffsets("hang", 0, 6), ReportedOffsets("hang", 1, 11)]
    assert [(i.line, i.kind) for i in issues] == [(4, "unparsed_line"), (5, "unparsed_line")]
    assert "no leader" in issues[0].reason
