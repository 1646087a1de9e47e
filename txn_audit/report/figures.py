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

from txn_audit.severity import Severity

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_TIMELINE_ROWS",
    "SEVERITY_COLOURS",
    "distribution_figure",
    "findings_trend_figure",
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


def stability_figure(partitions: Sequence[Row]) -> go.Figure | None:
    """High watermark and last stable offset per partition, with the records held back."""
    if not partitions:
        return None
    names = [f"{p['topic']}-{p['partition']}" for p in partitions]
    fig = go.Figure()
    fig.add_bar(name="high watermark", x=names, y=[_hw(p) for p in partitions])
    fig.add_bar(name="last stable offset", x=names, y=[p["last_stable_offset"] for p in partitions])
    fig.add_scatter(name="held records", x=names, y=[p["held_records"] for p in partitions], mode="markers",
                    marker={"size": 12, "color": "#c62828", "symbol": "diamond"}, yaxis="y2")
    fig.update_layout(title="High watermark vs last stable offset per partition", barmode="group",
                      yaxis={"title": "offset"},
                      yaxis2={"title": "held records", "overlaying": "y", "side": "right", "rangemode": "tozero"})
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


def distribution_figure(duration_seconds: np.ndarray, records: np.ndarray) -> go.Figure | None:
    """Durations and record counts of the closed transactions."""
    if not len(duration_seconds):
        return None
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("duration (s)", "records per transaction"))
    _binned(fig, duration_seconds, 40, "duration", row=1, col=1)
    _binned(fig, records, 40, "records", row=1, col=2)
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
