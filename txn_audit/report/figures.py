"""Plotly figures of a scan's tables, shared by the HTML report and ``txn_audit.explore``.

Builders take plain rows (``list[dict]`` as pyarrow's ``to_pylist`` gives them, absent values
``None``), NumPy arrays of values (the histograms, binned here so that a figure's size does not
grow with the dump) or, for the warehouse trends, pandas frames; they return a figure, or
``None`` when there is nothing to draw. Layout (size, template) is left to the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from txn_audit.formats.layout import INTERNAL_TOPICS, REMOTE_LOG_METADATA_TOPIC
from txn_audit.severity import MOST_SEVERE_FIRST, Severity

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_TIMELINE_ROWS",
    "SEVERITY_COLOURS",
    "TIMELINE_STATES",
    "activity_timeline_figure",
    "distribution_figure",
    "findings_trend_figure",
    "is_internal",
    "lso_lag_figure",
    "offsets_figure",
    "skew_figure",
    "stability_figure",
    "timeline_figure",
]

Row = dict[str, Any]

MAX_TIMELINE_ROWS = 60  # transactions drawn on the timeline
SEVERITY_COLOURS: dict[str, str] = {Severity.CRITICAL: "#c62828", Severity.WARNING: "#ef6c00",
                                    Severity.INFO: "#1565c0"}
OUTCOME_COLOURS: dict[str | None, str] = {"COMMIT": "#2e7d32", "ABORT": "#6d4c41", None: "#c62828"}
LATE_MARKER = {"symbol": "x", "size": 12, "color": "#ff1744"}
DATE_AXIS = {"title": "audit date", "type": "date", "dtick": 86_400_000, "tickformat": "%Y-%m-%d"}


def _label(t: Row) -> str:
    return f"{t['transactional_id'] or t['producer_id']} · {t['topic']}-{t['partition']} · #{t['txn_seq']}"


def _hw(stability: Row) -> Any:
    """The HW the partition's LSO is computed against (``partition_stability.effective_high_watermark``:
    the log end when the dump holds no HW); the bare ``high_watermark`` for rows that lack it."""
    effective = stability.get("effective_high_watermark")
    return stability.get("high_watermark") if effective is None else effective


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is one of Kafka's own (``__transaction_state``, ``__consumer_offsets``,
    the KRaft and tiered-storage metadata logs): their records are not the applications' data."""
    return topic in INTERNAL_TOPICS or topic == REMOTE_LOG_METADATA_TOPIC


def _held_for(ms: int | None) -> str:
    if ms is None:
        return "since an unknown time"
    seconds = ms / 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def stability_figure(partitions: Sequence[Row]) -> go.Figure | None:
    """The data partitions that hold records back from read_committed consumers (a last stable
    offset below the high watermark), one bar each: on the left the records held
    (``held_records``), on the right for how long (``held_ms``), both on log axes so that a
    partition holding 2 records shows beside one holding 90,000. Internal topics
    (``is_internal``) and partitions holding nothing are left out; None when none is left."""
    held = sorted((p for p in partitions if not is_internal(p["topic"]) and (p.get("held_records") or 0) > 0),
                  key=lambda p: (-(p["held_records"] or 0), p["topic"], p["partition"]))
    if not held:
        return None
    from plotly.subplots import make_subplots

    names = [f"{p['topic']}-{p['partition']}" for p in held]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("records held from read_committed consumers", "held for"))
    fig.add_bar(name="records held", y=names, x=[p["held_records"] for p in held], orientation="h",
                marker={"color": SEVERITY_COLOURS[Severity.CRITICAL]}, row=1, col=1,
                text=[f"{p['held_records']:,}" for p in held], textposition="outside", cliponaxis=False,
                hovertext=[f"LSO {p.get('last_stable_offset')} · HW {_hw(p)} · "
                           f"{p.get('open_transactions') or 0} open transaction(s)" for p in held])
    known = [p for p in held if p.get("held_ms") is not None]
    fig.add_bar(name="held for", y=[f"{p['topic']}-{p['partition']}" for p in known],
                x=[max(p["held_ms"], 1) / 1000 for p in known], orientation="h",
                marker={"color": SEVERITY_COLOURS[Severity.WARNING]}, row=1, col=2,
                text=[_held_for(p["held_ms"]) for p in known], textposition="outside", cliponaxis=False)
    fig.update_xaxes(type="log", title_text="records", row=1, col=1)
    fig.update_xaxes(type="log", title_text="seconds", row=1, col=2)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(title="Records held back per data partition (last stable offset below the high watermark)",
                      showlegend=False, height=max(300, 28 * len(held) + 140))
    return fig


#: what the report's timeline draws of a transaction, by its state (in the order they are
#: chosen: ``report.timeline_rows``), and in which colour
TIMELINE_STATES: dict[str, str] = {"hanging": "#b71c1c", "open": "#ef6c00", "late records": "#ff1744",
                                   "long": "#6a1b9a"}


def activity_timeline_figure(transactions: Sequence[Row], incidents: Sequence[Row],
                             as_of_ms: int) -> go.Figure | None:
    """Every transaction given (``partition_transactions`` rows with a ``timeline_state`` of
    ``TIMELINE_STATES``) as a bar from its first write to its marker, an open one to the audit
    time, one row per producer and partition; and every incident (rows with ``incident_id``,
    ``severity``, ``kind``, ``summary`` and a ``time_ms``) as a diamond on its producer's row,
    in its severity's colour. None when there is neither."""
    if not transactions and not incidents:
        return None

    def row_of(t: Row) -> str:
        who = t.get("transactional_id") or (f"producer {t['producer_id']}" if t.get("producer_id") is not None
                                            else str(t.get("kind", "")).replace("_", " "))
        where = f"{t['topic']}-{t['partition']}" if t.get("topic") is not None else ""
        return f"{who} · {where}" if where else who

    fig = go.Figure()
    for state, colour in TIMELINE_STATES.items():
        subset = [t for t in transactions if t["timeline_state"] == state and t["first_timestamp"] is not None]
        if not subset:
            continue
        starts = [t["first_timestamp"] for t in subset]
        ends = [t["marker_timestamp"] if t["marker_timestamp"] is not None else as_of_ms for t in subset]
        fig.add_bar(name=state, y=[row_of(t) for t in subset], base=starts, orientation="h", width=0.6,
                    x=[max(e - s, 1) for s, e in zip(starts, ends, strict=True)], marker={"color": colour},
                    hovertext=[f"#{t['txn_seq']} · offsets {t['first_offset']}-"
                               f"{t['marker_offset'] or t['last_data_offset']} · {t['marker_type'] or 'no marker'}"
                               for t in subset])
    for severity in MOST_SEVERE_FIRST:
        placed = [i for i in incidents if i["severity"] == severity]
        if placed:
            fig.add_scatter(name=f"{severity.value} incident", mode="markers", x=[i["time_ms"] for i in placed],
                            y=[row_of(i) for i in placed],
                            marker={"symbol": "diamond", "size": 14, "color": SEVERITY_COLOURS[severity],
                                    "line": {"width": 1, "color": "#000"}},
                            hovertext=[f"{i['kind'].replace('_', ' ')}: {i['summary'][:300]}" for i in placed])
    rows = len({row_of(t) for t in transactions} | {row_of(i) for i in incidents})
    fig.update_layout(title="Open, hanging and long transactions, and the incidents (open ones run to the audit time)",
                      xaxis={"type": "date", "title": "time (UTC)"}, barmode="overlay",
                      yaxis={"type": "category", "autorange": "reversed"}, height=max(380, 24 * rows + 160))
    return fig


def timeline_figure(ptx: Sequence[Row], as_of_ms: int, *, max_rows: int = MAX_TIMELINE_ROWS,
                    chronological: bool = False, show_markers: bool = False,
                    title: str | None = None) -> tuple[go.Figure | None, int]:
    """Transactions (``partition_transactions`` rows) as bars from first write to marker; open
    ones run to the audit time. Returns the figure and how many transactions were left out.

    By default the ``max_rows`` drawn are the open or late ones first, then the newest;
    ``chronological`` draws the newest ``max_rows`` in time order instead. ``show_markers``
    adds a point at each marker's time.
    """
    if not ptx:
        return None, 0

    def interest(t: Row) -> tuple[int, int]:
        return (0 if t["marker_offset"] is None or (t["late_batches"] or 0) > 0 else 1, -(t["first_timestamp"] or 0))

    if chronological:
        def when(t: Row) -> tuple[int, int]:
            return (t["first_timestamp"] or t["marker_timestamp"] or 0, t["txn_seq"])

        chosen = sorted(ptx, key=when)[-max_rows:]
    else:
        chosen = sorted(ptx, key=interest)[:max_rows]
    fig = go.Figure()
    for outcome in ("COMMIT", "ABORT", None):
        subset = [t for t in chosen if t["marker_type"] == outcome and t["first_timestamp"] is not None]
        if not subset:
            continue
        starts = [t["first_timestamp"] for t in subset]
        ends = [t["marker_timestamp"] if t["marker_timestamp"] is not None else as_of_ms for t in subset]
        labels = [_label(t) for t in subset]
        fig.add_bar(name=outcome or "open", y=labels, x=[max(e - s, 1) for s, e in zip(starts, ends, strict=True)],
                    base=starts, orientation="h", marker={"color": OUTCOME_COLOURS[outcome]},
                    hovertext=[f"offsets {t['first_offset']}-{t['marker_offset'] or t['last_data_offset']}"
                               for t in subset])
    if show_markers:
        for outcome in ("COMMIT", "ABORT"):
            marked = [t for t in chosen if t["marker_type"] == outcome and t["marker_timestamp"] is not None]
            if marked:
                fig.add_scatter(name=f"{outcome} marker", mode="markers", x=[t["marker_timestamp"] for t in marked],
                                y=[_label(t) for t in marked],
                                marker={"symbol": "line-ns-open", "size": 14, "line": {"width": 3},
                                        "color": OUTCOME_COLOURS[outcome]},
                                hovertext=[f"marker at offset {t['marker_offset']}" for t in marked])
    late = [t for t in chosen if (t["late_batches"] or 0) > 0 and t["first_timestamp"] is not None]
    if late:
        fig.add_scatter(name="late records", mode="markers", marker=LATE_MARKER,
                        x=[t["first_timestamp"] for t in late], y=[_label(t) for t in late])
    fig.update_layout(title=title or "Transaction timeline (start → marker; open ones run to the audit time)",
                      xaxis={"type": "date", "title": "time (UTC)"}, barmode="overlay",
                      height=max(380, 18 * len(chosen) + 120))
    return fig, len(ptx) - len(chosen)


def _binned(fig: go.Figure, values: np.ndarray, bins: int, name: str, **where: int) -> None:
    """A histogram drawn from counts per bin (the values themselves are not embedded)."""
    counts, edges = np.histogram(values, bins=bins)
    fig.add_bar(x=((edges[:-1] + edges[1:]) / 2).tolist(), y=counts.tolist(), width=float(edges[1] - edges[0]),
                name=name, hovertext=[f"{lo:g} to {hi:g}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)],
                **where)


def skew_figure(skew_seconds: np.ndarray, tolerance_ms: int) -> go.Figure | None:
    """Histogram of a producer's next first write minus its previous marker's time (seconds)."""
    if not len(skew_seconds):
        return None
    fig = go.Figure()
    _binned(fig, skew_seconds, 60, "next batch − previous marker")
    fig.add_vline(x=-tolerance_ms / 1000, line={"color": "#c62828", "dash": "dash"},
                  annotation_text=f"late-arrival tolerance −{tolerance_ms / 1000:g} s")
    fig.update_layout(title="Creation time of a producer's next batch minus its previous marker's time "
                      "(below the line: late arrival)", xaxis={"title": "seconds"}, yaxis={"title": "transactions"},
                      bargap=0)
    return fig


def _log_binned(fig: go.Figure, values: np.ndarray, bins: int, name: str, **where: int) -> None:
    """A histogram of positive ``values`` over bins of equal width on a log axis, drawn as its
    outline (the values themselves are not embedded); the smallest value opens the first bin."""
    low, high = float(values[values > 0].min(initial=np.inf)), float(values.max(initial=0))
    if not np.isfinite(low) or high <= 0:
        low = high = 1e-3
    edges = (np.logspace(np.log10(low), np.log10(high) + 1e-9, bins + 1) if high > low
             else np.array([low / 2, low * 2]))
    counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
    # a step outline over the bins' edges: bars of a log axis would need widths in its units
    fig.add_scatter(x=edges.tolist(), y=[*counts.tolist(), int(counts[-1])], mode="lines", line_shape="hv",
                    fill="tozeroy", name=name, hovertemplate="from %{x:.3g}: %{y}<extra></extra>", **where)


def distribution_figure(duration_seconds: np.ndarray, records: np.ndarray) -> go.Figure | None:
    """Durations of the closed transactions on a log axis (a few that ran for minutes beside
    thousands that took milliseconds), and their record counts (on a log axis too when they
    span more than a factor of 100)."""
    if not len(duration_seconds):
        return None
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("duration (s, log scale)", "records per transaction"))
    _log_binned(fig, np.maximum(duration_seconds, 0.001), 40, "duration", row=1, col=1)
    spread = len(records) and float(records.max()) > 100 * max(float(records.min()), 1)
    if spread:
        _log_binned(fig, np.maximum(records, 1), 40, "records", row=1, col=2)
    else:  # a few sizes: a bar each
        _binned(fig, records, max(1, min(40, int(records.max() - records.min()) + 1)), "records", row=1, col=2)
    fig.update_xaxes(type="log", row=1, col=1)
    fig.update_xaxes(type="log" if spread else "linear", row=1, col=2)
    fig.update_yaxes(title_text="transactions", row=1, col=1)
    fig.update_layout(title="Transaction duration and size (closed transactions)", showlegend=False, bargap=0)
    return fig


def offsets_figure(ptx: Sequence[Row], stability: Row | None = None,
                   findings: Sequence[Row] = ()) -> go.Figure | None:
    """One partition on the offset axis: each transaction from its first offset to its marker
    (open ones to their last data offset), the log start, LSO and high watermark as lines, and
    the findings at their first offset."""
    spans = [t for t in ptx if t["first_offset"] is not None or t["marker_offset"] is not None]
    if not spans and stability is None:
        return None
    fig = go.Figure()
    for outcome in ("COMMIT", "ABORT", None):
        subset = [t for t in spans if t["marker_type"] == outcome]
        if not subset:
            continue
        starts = [t["first_offset"] if t["first_offset"] is not None else t["marker_offset"] for t in subset]
        ends = [t["marker_offset"] if t["marker_offset"] is not None else t["last_data_offset"] for t in subset]
        fig.add_bar(name=outcome or "open", y=[_label(t) for t in subset],
                    x=[max(e - s + 1, 1) for s, e in zip(starts, ends, strict=True)], base=starts,
                    orientation="h", marker={"color": OUTCOME_COLOURS[outcome]},
                    hovertext=[f"{t['state']}: offsets {s}-{e}, {t['records']} records"
                               for t, s, e in zip(subset, starts, ends, strict=True)])
    if stability is not None:
        lines = (("log start", stability.get("log_start_offset"), "#757575", "bottom right"),
                 ("LSO", stability.get("last_stable_offset"), "#6a1b9a", "top right"),
                 ("high watermark", _hw(stability), "#000000", "top left"))
        for name, value, colour, position in lines:
            if value is not None:
                fig.add_vline(x=value, line={"color": colour, "dash": "dash"}, annotation_text=f"{name} {value}",
                              annotation_position=position)
    placed = [f for f in findings if f.get("first_offset") is not None]
    if placed:
        fig.add_scatter(name="findings", mode="markers", x=[f["first_offset"] for f in placed],
                        y=[f"{f['severity']} · {f['kind']}" for f in placed],
                        marker={"symbol": "x", "size": 12, "color": [SEVERITY_COLOURS.get(f["severity"], "#333")
                                                                      for f in placed]},
                        hovertext=[f["evidence"] for f in placed])
    fig.update_layout(title="Transactions on the offset axis (first offset → marker)", barmode="overlay",
                      xaxis={"title": "offset"}, height=max(380, 18 * (len(spans) + len(placed)) + 120))
    return fig


def findings_trend_figure(counts: pd.DataFrame, *, title: str = "Findings per audit date") -> go.Figure | None:
    """Stacked bars of finding counts: ``counts`` indexed by audit date, one column per group."""
    if counts.empty:
        return None
    fig = go.Figure()
    for column in counts.columns:
        colour = SEVERITY_COLOURS.get(str(column))
        fig.add_bar(name=str(column), x=list(counts.index), y=list(counts[column]),
                    marker={"color": colour} if colour else None)
    fig.update_layout(title=title, barmode="stack", xaxis=DATE_AXIS, yaxis={"title": "findings"})
    return fig


def lso_lag_figure(lag: pd.DataFrame) -> go.Figure | None:
    """One line per partition: high watermark minus last stable offset on each audit date
    (``lag`` has ``audit_date``, ``topic``, ``partition`` and ``lso_lag`` columns)."""
    if lag.empty:
        return None
    fig = go.Figure()
    for (topic, partition), rows in lag.sort_values("audit_date").groupby(["topic", "partition"], sort=True):
        fig.add_scatter(name=f"{topic}-{partition}", mode="lines+markers", x=list(rows["audit_date"]),
                        y=list(rows["lso_lag"]))
    fig.update_layout(title="LSO lag (high watermark − last stable offset) per partition",
                      xaxis=DATE_AXIS, yaxis={"title": "offsets behind the high watermark", "rangemode": "tozero"})
    return fig
