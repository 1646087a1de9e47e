"""One self-contained HTML report per scan: ``OUT/report.html``.

Reads the scan's ``summary.json`` and Parquet tables with pyarrow (no Spark), embeds
plotly.js once and loads nothing from the network, so it opens anywhere, offline.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.outputs import write_text_atomic
from txn_audit.report.figures import (
    SEVERITY_COLOURS,
    TIMELINE_STATES,
    activity_timeline_figure,
    distribution_figure,
    is_internal,
    skew_figure,
    stability_figure,
)
from txn_audit.detect.words import duration_text
from txn_audit.schemas import ALL_TABLES, HW_CAPPED, in_ms
from txn_audit.severity import MOST_SEVERE_FIRST
from txn_audit.timeparse import format_time_ms
from txn_audit.usage import DEFAULTS

__all__ = ["blocked_consumers_section", "closed_durations_and_records", "incident_marks", "skew_seconds",
           "timeline_rows", "write_report"]

MAX_TABLE_ROWS = 500  # findings listed in the HTML table
MAX_TIMELINE_ROWS = 5000  # transactions drawn on the timeline: a bound on the page's size


def _read(tables_dir: Path, name: str, columns: list[str]) -> pa.Table:
    """The columns of a table as Arrow (never as Python rows: a table may hold millions)."""
    path = tables_dir / name
    schema = in_ms(ALL_TABLES[name])  # the report computes in epoch ms
    if not path.is_dir():
        return pa.table({c: pa.array([], schema.field(c).type) for c in columns})
    return ds.dataset(str(path), format="parquet", schema=schema).to_table(columns=columns)


def _values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)


def timeline_rows(ptx: pa.Table, as_of_ms: int, timeout_ms: int,
                  max_rows: int = MAX_TIMELINE_ROWS) -> tuple[list[dict[str, Any]], int]:
    """The transactions the timeline draws, each with its ``timeline_state``: every open one
    (``hanging`` once open longer than ``timeout_ms`` at the audit time, else ``open``), every
    closed one with records appended after its marker (``late records``) and every other that
    ran longer than ``timeout_ms`` (``long``); in that order of states, then newest first, ties
    in a fixed order. Returns them (at most ``max_rows``, a bound on the page's size that a dump
    reaches only with thousands of such transactions) and how many more there are."""
    starts = pc.fill_null(ptx["first_timestamp"], as_of_ms)
    ends = pc.if_else(pc.is_valid(ptx["marker_timestamp"]), ptx["marker_timestamp"], pa.scalar(as_of_ms, pa.int64()))
    over = pc.greater(pc.subtract(pc.cast(ends, pa.int64()), pc.cast(starts, pa.int64())), timeout_ms)
    is_open = pc.is_null(ptx["marker_offset"])
    late = pc.greater(pc.fill_null(ptx["late_batches"], 0), 0)
    rank = pc.case_when(pc.make_struct(pc.and_(is_open, over), is_open, late, over),  # TIMELINE_STATES' order
                        *(pa.scalar(i, pa.int8()) for i in range(4)))
    keyed = ptx.append_column("_rank", rank).append_column("_start", pc.fill_null(ptx["first_timestamp"], 0))
    chosen = keyed.filter(pc.is_valid(keyed["_rank"]))
    order = [("_rank", "ascending"), ("_start", "descending"), ("topic", "ascending"),
             ("partition", "ascending"), ("producer_id", "ascending"), ("txn_seq", "ascending")]
    total = chosen.num_rows
    if total > max_rows:  # the first rows in that order, without sorting (and moving) every row
        chosen = chosen.take(pc.select_k_unstable(chosen, k=max_rows, sort_keys=order))
    chosen = chosen.sort_by(order)
    names = list(TIMELINE_STATES)
    rows: list[dict[str, Any]] = [{**{k: v for k, v in r.items() if not k.startswith("_")},
                                   "timeline_state": names[r["_rank"]]} for r in chosen.to_pylist()]
    return rows, total - len(rows)


def incident_marks(incidents: list[dict[str, Any]], findings: list[dict[str, Any]],
                   as_of_ms: int) -> list[dict[str, Any]]:
    """Every incident with the time the timeline places it at (``time_ms``): its findings'
    earliest first timestamp, else the time its records are held since, else the audit time."""
    earliest: dict[str, int] = {}
    for f in findings:
        at = f.get("first_timestamp")
        key = str(f.get("incident_id"))
        if at is not None and (key not in earliest or at < earliest[key]):
            earliest[key] = at
    return [{**i, "time_ms": earliest.get(i["incident_id"], i.get("held_since_timestamp") or as_of_ms)}
            for i in incidents]


def skew_seconds(ptx: pa.Table) -> np.ndarray:
    """Per transaction: its first write minus its producer's previous marker time, in seconds."""
    times = ptx.select(["first_timestamp", "prev_marker_timestamp"])
    known = times.filter(pc.and_(pc.is_valid(times["prev_marker_timestamp"]), pc.is_valid(times["first_timestamp"])))
    seconds: np.ndarray = (_values(known["first_timestamp"]) - _values(known["prev_marker_timestamp"])) / 1000
    return seconds


def closed_durations_and_records(ptx: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Duration in seconds and record count of every closed transaction."""
    times = ptx.select(["marker_timestamp", "first_timestamp", "records"])
    closed = times.filter(pc.and_(pc.is_valid(times["marker_timestamp"]), pc.is_valid(times["first_timestamp"])))
    seconds = (_values(closed["marker_timestamp"]) - _values(closed["first_timestamp"])) / 1000
    return seconds, _values(pc.fill_null(closed["records"], 0))


def _esc(value: Any) -> str:
    return "" if value is None else html.escape(str(value))


def _figure_html(fig: go.Figure, first: list[bool]) -> str:
    fig.update_layout(margin={"l": 40, "r": 20, "t": 50, "b": 40}, template="plotly_white", height=380)
    include = first[0]
    first[0] = False
    html_text: str = pio.to_html(fig, full_html=False, include_plotlyjs=include, config={"displaylogo": False})
    return html_text


def _findings_table(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return "<p class='ok'>No findings.</p>"
    rows = []
    for f in findings[:MAX_TABLE_ROWS]:
        where = f"{f['topic']}-{f['partition']}" if f.get("topic") is not None else ""
        producer = "" if f.get("producer_id") is None else f"{f['producer_id']}/{f.get('producer_epoch')}"
        if f.get("transactional_id"):
            producer += f" ({f['transactional_id']})"
        offsets = "" if f.get("first_offset") is None else str(f["first_offset"]) + (
            "" if f.get("last_offset") in (None, f["first_offset"]) else f"-{f['last_offset']}")
        colour = SEVERITY_COLOURS.get(f["severity"], "#333")
        rows.append(
            f"<tr><td style='color:{colour};font-weight:bold'>{_esc(f['severity'])}</td><td>{_esc(f['kind'])}</td>"
            f"<td>{_esc(where)}</td><td>{_esc(producer)}</td><td>{_esc(offsets)}</td>"
            f"<td>{_esc(f['evidence'])}</td><td><code>{_esc(f.get('remediation'))}</code></td></tr>"
        )
    more = "" if len(findings) <= MAX_TABLE_ROWS else (
        f"<p>{len(findings) - MAX_TABLE_ROWS} more findings are in tables/findings/.</p>")
    return ("<table><thead><tr><th>severity</th><th>kind</th><th>partition</th><th>producer</th><th>offsets</th>"
            "<th>evidence</th><th>fix</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>" + more)


def incidents_section(incidents: list[dict[str, Any]], findings: list[dict[str, Any]]) -> str:
    """One block per incident (``summary.json``'s ``incidents``), most severe first: its cause in
    one paragraph, its fix, and its findings beneath it."""
    if not incidents:
        return "<p class='ok'>No incidents: nothing to act on.</p>"
    by_incident: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_incident.setdefault(str(f.get("incident_id")), []).append(f)
    blocks = []
    for incident in incidents:
        colour = SEVERITY_COLOURS.get(incident["severity"], "#333")
        place = ", ".join(incident.get("partitions") or [])
        blocks.append(
            f"<div class='incident'><h3><span style='color:{colour}'>{_esc(incident['severity'])}</span> "
            f"{_esc(incident['kind'].replace('_', ' '))}{' · ' + _esc(place) if place else ''}</h3>"
            f"<p>{_esc(incident['summary'])}</p>"
            f"<p><b>Fix:</b></p><pre>{_esc(incident['remediation'])}</pre>"
            f"<details><summary>{_esc(incident['findings'])} finding(s)</summary>"
            f"{_findings_table(by_incident.get(incident['incident_id'], []))}</details></div>")
    return "".join(blocks)


def _quality_section(results_path: Path | None, out_dir: Path) -> str:
    if results_path is None or not results_path.is_file():
        return "<p>Data-quality checks were not run.</p>"
    try:
        doc = json.loads(results_path.read_text())
    except (OSError, ValueError) as err:
        return f"<p>Data-quality results unreadable: {_esc(err)}</p>"
    results = doc.get("results", [])
    per_table: dict[str, Counter[str]] = {}
    for r in results:
        per_table.setdefault(str(r.get("table")), Counter())["passed" if r.get("success") else "failed"] += 1
    rows = "".join(f"<tr><td>{_esc(t)}</td><td>{c['passed']}</td><td>{c['failed']}</td></tr>"
                   for t, c in sorted(per_table.items()))
    failed = "".join(f"<li><b>{_esc(r.get('table'))}.{_esc(r.get('check'))}</b>: {_esc(r.get('rule'))} "
                     f"({_esc(r.get('unexpected_count'))} row(s)){' — dump damage' if r.get('data_health') else ''}"
                     "</li>" for r in results if not r.get("success"))
    docs = results_path.parent / "docs" / "index.html"
    link = (f"<p><a href='{_esc(docs.relative_to(out_dir).as_posix())}'>Data Docs</a></p>"
            if docs.is_file() and docs.is_relative_to(out_dir) else "")
    return (f"<p>{sum(c['passed'] for c in per_table.values())} checks passed, "
            f"{sum(c['failed'] for c in per_table.values())} failed.</p>"
            f"<table><thead><tr><th>table</th><th>passed</th><th>failed</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f"<ul>{failed}</ul>" if failed else "") + link)


PTX_COLUMNS = ["topic", "partition", "producer_id", "transactional_id", "txn_seq", "first_offset", "last_data_offset",
               "marker_offset", "marker_type", "marker_timestamp", "first_timestamp", "prev_marker_timestamp",
               "late_batches", "records"]

CSS = """body{font-family:system-ui,-apple-system,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;width:100%;font-size:.9em}td,th{border:1px solid #ddd;padding:.3em .5em;
vertical-align:top;text-align:left}th{background:#f5f5f5}code{font-size:.85em}.verdict{font-size:1.3em;
font-weight:bold}.ok{color:#2e7d32}.note{color:#666;font-size:.9em}
.incident{border-left:4px solid #ddd;padding:0 .8em;margin:.8em 0}pre{white-space:pre-wrap}"""


HW_SOURCE_NAMES = {
    "checkpoint": "the broker's replication-offset-checkpoint",
    "offsets_file": "the offsets file beside the text dump (the cluster's report, not the dump itself)",
    "log_end": "nowhere: the dump holds none, so the log end offset stands in for it and the LSO is "
               "computed against that",
    HW_CAPPED: "the log end offset, because the replica's checkpoint gives a high watermark beyond its own log "
               "end (the log lost its tail after the checkpoint)",
}

REPLICA_TABLE_COLUMNS = ["topic", "partition", "broker_id", "log_dir", "chosen", "leader_epoch", "metadata_leader",
                   "in_isr", "log_start_offset", "log_end_offset", "high_watermark", "hw_source",
                   "last_stable_offset", "open_transactions", "held_records", "divergence", "divergent_offset"]


def replicas_section(partitions: list[dict[str, Any]], replicas: pa.Table) -> str:
    """Partitions held by several copies: which one the audit reports and why, then every copy
    audited on its own data; empty when every partition has one copy."""
    several = [p for p in partitions if (p.get("replicas") or 1) > 1]
    if not several:
        return ""
    choice = "".join(f"<tr><td>{_esc(p['topic'])}-{_esc(p['partition'])}</td><td>{_esc(p['chosen_replica'])}</td>"
                     f"<td>{_esc(p['replica_choice_reason'])}</td></tr>" for p in several)
    head = "".join(f"<th>{_esc(c.replace('_', ' '))}</th>" for c in REPLICA_TABLE_COLUMNS)
    keys = {(p["topic"], p["partition"]) for p in several}
    body = "".join("<tr>" + "".join(f"<td>{_esc('' if r[c] is None else r[c])}</td>" for c in REPLICA_TABLE_COLUMNS)
                   + "</tr>" for r in replicas.to_pylist() if (r["topic"], r["partition"]) in keys)
    return (f"<h2>Replicas</h2><p>{len(several)} partitions have several copies in the dump; each partition's "
            "verdict comes from one of them:</p>"
            f"<table><thead><tr><th>partition</th><th>audited copy</th><th>why</th></tr></thead><tbody>{choice}"
            "</tbody></table><p class='note'>Every copy, audited on its own data and compared with the audited one "
            "(tables/replica_stability/):</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


#: ``blocked_consumers`` columns the report shows, with their headings
BLOCKED_COLUMNS = (("group_id", "group"), ("partition", "partition"), ("committed_offset", "committed offset"),
                   ("last_stable_offset", "LSO"), ("high_watermark", "HW"), ("records_behind", "records behind"),
                   ("time_behind_ms", "time behind"), ("culprit_transactional_id", "held by"))


#: what ``time_behind_ms`` is measured from (``detect.blocked_consumers``)
BEHIND_FROM = {"held_transaction": "since the holding transaction's first record", "commit": "since the commit"}


def blocked_consumers_section(blocked: list[dict[str, Any]]) -> str:
    """The consumer groups blocked by a held LSO (``summary.json``'s ``blocked_consumers``), one
    row each; empty when none is."""
    if not blocked:
        return ""

    def cell(row: dict[str, Any], column: str) -> str:
        value = row[column]
        if column == "partition":
            return f"{row['topic']}-{value}"
        if column == "time_behind_ms":
            return "" if value is None else f"{duration_text(int(value))} ({BEHIND_FROM[row['time_behind_from']]})"
        if column == "culprit_transactional_id":
            return value or ("" if row["culprit_producer_id"] is None else f"producer {row['culprit_producer_id']}")
        return "" if value is None else str(value)

    head = "".join(f"<th>{_esc(title)}</th>" for _, title in BLOCKED_COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{_esc(cell(row, c))}</td>" for c, _ in BLOCKED_COLUMNS) + "</tr>"
                   for row in blocked)
    groups = len({row["group_id"] for row in blocked})
    return (f"<h2>Blocked consumer groups</h2><p>{groups} consumer group(s) committed at or below a last stable "
            "offset an open transaction holds: their read_committed consumers read nothing past it until the "
            "transaction ends (tables/blocked_consumers/).</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


#: ``partition_stability`` columns the report shows: the partition status as the table gives it
STATUS_COLUMNS = ["topic", "partition", "high_watermark", "effective_high_watermark", "hw_source", "last_stable_offset",
                  "lso_below_hw", "held_records", "held_ms", "open_transactions"]


def held_note(status: list[dict[str, Any]]) -> str:
    """The partitions whose LSO is below the high watermark (``partition_stability.lso_below_hw``,
    as the terminal and ``summary.json`` count them), in one sentence."""
    held = [p for p in status if p["lso_below_hw"] and not is_internal(p["topic"])]
    internal = [p for p in status if is_internal(p["topic"])]
    inside = (f" Internal topics, apart: {len(internal)} partition(s), "
              f"{sum(p['held_records'] for p in internal):,} records held"
              + "".join(f"; {p['topic']}-{p['partition']} holds {p['held_records']:,}"
                        for p in internal if p["lso_below_hw"]) + "." if internal else "")
    if not held:
        return "No data partition's last stable offset is below its high watermark." + inside
    listed = ", ".join(f"{p['topic']}-{p['partition']} ({p['held_records']:,} records held)" for p in held[:20])
    more = f" and {len(held) - 20} more" if len(held) > 20 else ""
    return (f"{len(held)} data partition(s) whose last stable offset is below the high watermark: {listed}{more}."
            + inside)


def hw_sources_note(partitions: list[dict[str, Any]]) -> str:
    """How the partitions' high watermarks were obtained, in one sentence."""
    counts: dict[str, int] = {}
    for p in partitions:
        source = p.get("hw_source") or "checkpoint"
        counts[source] = counts.get(source, 0) + 1
    parts = [f"{n} from {HW_SOURCE_NAMES.get(source, source)}" for source, n in sorted(counts.items())]
    return "High watermarks: " + "; ".join(parts) + "."


def write_report(out_dir: Path, *, quality_results: Path | None = None) -> Path:
    """Write ``out_dir/report.html`` from ``out_dir/summary.json`` and ``out_dir/tables/``."""
    summary_doc = json.loads((out_dir / "summary.json").read_text())
    summary = summary_doc.get("summary", {})
    as_of_ms = int(summary_doc.get("as_of_ms") or 0)
    tolerance_ms = int((summary.get("options") or {}).get("late_tolerance_ms", DEFAULTS.late_tolerance_ms))
    tables_dir = out_dir / "tables"
    findings = summary_doc.get("findings", [])
    partitions = summary_doc.get("partitions", [])
    ptx = _read(tables_dir, "partition_transactions", PTX_COLUMNS)
    status = sorted(_read(tables_dir, "partition_stability", STATUS_COLUMNS).to_pylist(),
                    key=lambda p: (p["topic"], p["partition"]))
    timeout_ms = int((summary.get("options") or {}).get("max_transaction_timeout_ms",
                                                       DEFAULTS.max_transaction_timeout_ms))
    incidents = summary_doc.get("incidents", [])
    first = [True]

    def figure(fig: go.Figure | None, empty: str) -> str:
        return _figure_html(fig, first) if fig is not None else f"<p>{_esc(empty)}</p>"

    held = figure(stability_figure(status), "No data partition holds records back.")
    if partitions:
        held += f"<p>{_esc(held_note(status))}</p><p class='note'>{_esc(hw_sources_note(partitions))}</p>"
    chosen, left_out = timeline_rows(ptx, as_of_ms, timeout_ms)
    timeline = figure(activity_timeline_figure(chosen, incident_marks(incidents, findings, as_of_ms), as_of_ms),
                      "no open, hanging or long transaction and no incident")
    drawn = {state: sum(t["timeline_state"] == state for t in chosen) for state in TIMELINE_STATES}
    timeline += (f"<p class='note'>{' · '.join(f'{n} {s}' for s, n in drawn.items())} transaction(s) "
                 f"(long: over the {timeout_ms / 1000:g} s transaction timeout), {len(incidents)} incident(s); "
                 f"the {ptx.num_rows - len(chosen) - left_out:,} other transactions are in "
                 "tables/partition_transactions/.</p>")
    if left_out > 0:
        timeline += (f"<p class='note'>{left_out} more transactions of those states are not drawn; they are in "
                     "tables/partition_transactions/.</p>")
    sections = [
        f"<h2>Records held per partition</h2>{held}",
        f"<h2>Timeline</h2>{timeline}",
    ]
    later = [
        ("Marker vs next batch", skew_figure(skew_seconds(ptx), tolerance_ms), "no producer wrote after a marker"),
        ("Durations and sizes", distribution_figure(*closed_durations_and_records(ptx)), "no closed transactions"),
    ]
    counts = summary.get("findings_by_severity", {})
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>txn-audit report</title><style>{CSS}</style></head>
<body>
<h1>txn-audit report</h1>
<p class="verdict">{_esc(summary.get("verdict", ""))}</p>
<p>input {_esc(summary_doc.get("input"))} · audit time {_esc(format_time_ms(as_of_ms))} ·
{_esc(summary.get("partitions", len(partitions)))} partitions ·
{' · '.join(f"{_esc(counts.get(s.value, 0))} {_esc(s.value)}" for s in MOST_SEVERE_FIRST)}</p>
<h2>Incidents</h2>
{incidents_section(incidents, findings)}
{blocked_consumers_section(summary_doc.get("blocked_consumers", []))}
{''.join(sections)}
<h2>Findings</h2>
{_findings_table(findings)}
{replicas_section(partitions, _read(tables_dir, "replica_stability", REPLICA_TABLE_COLUMNS))}
{''.join(f"<h2>{_esc(title)}</h2>{figure(fig, empty)}" for title, fig, empty in later)}
<h2>Data quality</h2>
{_quality_section(quality_results, out_dir)}
</body></html>
"""
    target = out_dir / "report.html"
    write_text_atomic(target, page)
    return target
