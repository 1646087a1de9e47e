"""Text checkpoints, Java properties and ``partition.metadata``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.checkpoint import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_properties,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    encode_partition_metadata,
    encode_properties,
)
from txn_audit.formats.model import OffsetCheckpoint

HW = "0\n3\n__transaction_state 0 601\npayments 1 1378\nmy.topic-v2 17 0\n"


def test_offset_checkpoint() -> None:
    cp = decode_offset_checkpoint(HW)
    assert cp == OffsetCheckpoint(
        0, {("__transaction_state", 0): 601, ("payments", 1): 1378, ("my.topic-v2", 17): 0}
    )


@pytest.mark.parametrize("text", ["", "0\n", "0", "0\n0\n", "0\r\n0\r\n"])
def test_empty_checkpoints(text: str) -> None:
    assert decode_offset_checkpoint(text) == OffsetCheckpoint(0, {})


def test_line_endings_and_whitespace_runs() -> None:
    assert decode_offset_checkpoint("0\r\n1\r\nt\t 2   5  \r\n").entries == {("t", 2): 5}
    assert decode_offset_checkpoint("0\r1\rt 2 5").entries == {("t", 2): 5}


def _bad(text: str) -> CorruptInputError:
    with pytest.raises(CorruptInputError) as err:
        decode_offset_checkpoint(text)
    assert err.value.kind == "bad_checkpoint"
    return err.value


def test_bad_version() -> None:
    err = _bad("1\n0\n")
    assert "line 1" in err.detail and "version 1" in err.detail and err.position == 0
    assert "line 1" in _bad("zero\n0\n").detail
    assert "line 1" in _bad(" 0\n0\n").detail  # Integer.parseInt does not trim


def test_count_mismatch() -> None:
    err = _bad("0\n3\nt 0 1\nt 1 2\n")
    assert "line 2" in err.detail and "3" in err.detail and "2 entries" in err.detail and err.position == 2
    assert "line 2" in _bad("0\n0\nt 0 1\n").detail
    assert "line 2" in _bad("0\n-1\n").detail


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("0\n2\nt 0 1\nt 1\n", 4),
        ("0\n1\nt 0 1 9\n", 3),
        ("0\n1\n t 0 1\n", 3),  # leading whitespace gives an empty first field
        ("0\n1\nt x 1\n", 3),
        ("0\n1\nt 0 1_0\n", 3),  # Python's int() would take it, Long.parseLong does not
        ("0\n1\nt 2147483648 1\n", 3),
        ("0\n2\nt 0 1\n\n", 4),  # empty line
        ("0\nx\n", 2),
    ],
)
def test_bad_lines_name_their_line(text: str, line: int) -> None:
    err = _bad(text)
    assert f"line {line}" in err.detail
    assert err.position == len("\n".join(text.split("\n")[: line - 1]).encode()) + 1


def test_duplicate_entries_keep_the_last() -> None:
    assert decode_offset_checkpoint("0\n2\nt 0 1\nt 0 5\n").entries == {("t", 0): 5}


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-1, 2**63 - 1), max_size=20))
def test_offset_checkpoint_round_trip(entries: dict[tuple[str, int], int]) -> None:
    text = encode_offset_checkpoint(entries)
    assert text.startswith(f"0\n{len(entries)}\n")
    assert decode_offset_checkpoint(text) == OffsetCheckpoint(0, entries)


def test_leader_epoch_checkpoint() -> None:
    assert decode_leader_epoch_checkpoint("0\n2\n0 0\n3 1200\n") == [(0, 0), (3, 1200)]
    assert decode_leader_epoch_checkpoint("") == []
    with pytest.raises(CorruptInputError) as err:
        decode_leader_epoch_checkpoint("0\n1\n0 0 0\n")
    assert "line 3" in err.value.detail


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=10))
def test_leader_epoch_round_trip(entries: list[tuple[int, int]]) -> None:
    assert decode_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)) == entries


# -- properties --------------------------------------------------------------------------


def test_meta_properties() -> None:
    text = "#\n#Sun Nov 22 20:09:42 UTC 2026\nnode.id=1\nversion=1\ncluster.id=oUtH6vWpSjeNZlWi3aY1xA\n"
    assert decode_properties(text) == {"node.id": "1", "version": "1", "cluster.id": "oUtH6vWpSjeNZlWi3aY1xA"}


def test_properties_syntax() -> None:
    text = (
        "  ! bang comment\n"
        "a = 1\n"
        "b:2\n"
        "c 3\n"
        "d\t=\t  4 \n"
        "e\n"
        "f=multi \\\n"
        "    line \\\\\n"
        "g=x\\ty\\u0041\\=\\:\n"
        "key\\ with\\ spaces=v\n"
        "h==5\n"
        "a=override\r\n"
        "   \n"
        "tail=\\\n"
    )
    assert decode_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "4 ",
        "e": "",
        "f": "multi line \\",
        "g": "x\tyA=:",
        "key with spaces": "v",
        "h": "=5",
        "tail": "",
    }


def test_bad_unicode_escape() -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_properties("a=1\nb=\\u12G4\n")
    assert err.value.kind == "bad_checkpoint" and "line 2" in err.value.detail


def test_encode_properties_header() -> None:
    text = encode_properties({"node.id": "1"}, comment="written by txn-audit")
    assert text == "#written by txn-audit\nnode.id=1\n"


@given(st.dictionaries(st.text(max_size=15), st.text(max_size=15), max_size=8))
def test_properties_round_trip(props: dict[str, str]) -> None:
    text = encode_properties(props)
    assert text.isascii()
    assert decode_properties(text) == props


# -- partition.metadata ------------------------------------------------------------------


def test_partition_metadata() -> None:
    text = "version: 0\ntopic_id: zl1jYSJcSname3Azjhjy7w"  # as on disk: no final newline
    assert decode_partition_metadata(text) == {"version": "0", "topic_id": "zl1jYSJcSname3Azjhjy7w"}
    assert decode_partition_metadata(encode_partition_metadata("zl1jYSJcSname3Azjhjy7w")) == {
        "version": "0",
        "topic_id": "zl1jYSJcSname3Azjhjy7w",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "version: 0\n",
        "version: x\ntopic_id: zl1jYSJcSname3Azjhjy7w\n",
        "version: 0\ntopic_id: short\n",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",  # the zero UUID
        "version 0\ntopic_id: zl1jYSJcSname3Azjhjy7w\n",
    ],
)
def test_bad_partition_metadata(text: str) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_partition_metadata(text)
    assert err.value.kind == "bad_checkpoint"
