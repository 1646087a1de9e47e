"""Scan outputs and the nightly warehouse as pandas frames, for notebooks.

Reads the Parquet tables with pyarrow (no Spark, so a notebook starts in a second):

- ``load_scan(OUT)`` opens a scan's output folder (``txn-audit scan --out OUT``);
  ``choose_target`` picks a partition and producer (by default the one with the most serious
  finding), ``partition_view`` gathers its transactions, markers, batches and findings, and
  ``timeline_figure`` / ``offsets_figure`` / ``batches_figure`` draw them.
- ``load_history(WAREHOUSE)`` reads every table of the nightly warehouse with ``audit_date``
  as a column; ``findings_by_date``, ``lso_lag`` and ``new_findings`` follow the trends, and
  ``findings_trend_figure`` / ``lso_lag_figure`` draw them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io._base_renderers import MimetypeRenderer, PlotlyRenderer
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit import warehouse as wh
from txn_audit.errors import UsageError
from txn_audit.migrate import SCHEMA_VERSION, migrate
from txn_audit.report import figures
from txn_audit.schemas import ALL_TABLES
from txn_audit.severity import MOST_SEVERE_FIRST
from txn_audit.timeparse import format_time_ms

__all__ = [
    "OfflineRenderer",
    "PartitionView",
    "ScanTables",
    "Target",
    "batches_figure",
    "choose_target",
    "describe_history",
    "epoch_ms",
    "findings_by_date",
    "findings_trend_figure",
    "load_history",
    "load_scan",
    "lso_lag",
    "lso_lag_figure",
    "new_findings",
    "offsets_figure",
    "partition_view",
    "rows",
    "show",
    "stability_figure",
    "timeline_figure",
    "use_offline_plotly",
]

SEVERITY_ORDER = tuple(s.value for s in MOST_SEVERE_FIRST)
#: the renderer ``use_offline_plotly`` registers (``OfflineRenderer``)
OFFLINE_RENDERER = "txn_audit_offline"
_NULLABLE: dict[pa.DataType, Any] = {
    pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(),
}


class OfflineRenderer(MimetypeRenderer):  # type: ignore[misc]
    """Each figure as two representations, neither of which loads anything from a network:

    - plotly's JSON (``application/vnd.plotly.v1+json``), drawn by JupyterLab, Notebook 7 and VS
      Code with the plotly.js they bundle;
    - ``text/html`` that draws the same figure wherever a notebook's HTML is shown with its
      scripts but without plotly's renderer (an HTML export such as ``jupyter nbconvert --to
      html``): plotly.js itself is embedded in the first figure this renderer shows, the later
      ones draw with it. (plotly's own HTML renderers load plotly.js or MathJax from a CDN.)"""

    def __init__(self) -> None:
        self.embedded = False

    def to_mimebundle(self, fig_dict: dict[str, Any]) -> dict[str, Any]:
        bundle: dict[str, Any] = PlotlyRenderer().to_mimebundle(fig_dict)
        bundle["text/html"] = pio.to_html(fig_dict, full_html=False, include_plotlyjs=not self.embedded,
                                          include_mathjax=False, validate=False, default_width="100%",
                                          config={"displaylogo": False})
        self.embedded = True
        return bundle


def use_offline_plotly(renderer: str = OFFLINE_RENDERER) -> None:
    """Make ``fig.show()`` render without the network (the default fetches plotly.js from a CDN):
    by default with a new ``OfflineRenderer``, which embeds plotly.js in the next figure shown."""
    if renderer == OFFLINE_RENDERER:
        pio.renderers[OFFLINE_RENDERER] = OfflineRenderer()
    pio.renderers.default = renderer


def show(fig: go.Figure | None, empty: str = "nothing to draw") -> None:
    """Show a figure, or say there is nothing to draw."""
    if fig is None:
        print(empty)
    else:
        fig.show()


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """Integers and booleans as pandas' nullable types: offsets stay integers next to nulls."""
    return table.to_pandas(types_mapper=_NULLABLE.get, date_as_object=False)


def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as plain rows, missing values as ``None``, instants as epoch ms (``epoch_ms``): what
    the figure builders take."""
    df = df.assign(**{name: epoch_ms(df[name]) for name in df.columns
                      if isinstance(df[name].dtype, pd.DatetimeTZDtype)})
    return [{k: (None if _missing(v) else v) for k, v in record.items()} for record in df.to_dict("records")]


def epoch_ms(column: pd.Series) -> pd.Series:
    """A ``TIMESTAMP`` column as pandas reads it (``datetime64[ms, UTC]``) as epoch milliseconds
    (nullable ``Int64``, missing where the time is): the integers Kafka writes."""
    values = pa.Array.from_pandas(column).cast(pa.int64()).to_pandas(types_mapper=_NULLABLE.get)
    return pd.Series(values.array, index=column.index, name=column.name)


def _missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and arrays are values, not missing
        return False


def _severity_rank(severity: Any) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


# -- one scan ------------------------------------------------------------------------------


@dataclass
class ScanTables:
    """A scan output folder: ``summary`` is its ``summary.json``; ``scan[name]`` is a table as a
    pandas frame (read on first use, then kept; an absent table is empty, with its columns)."""

    out_dir: Path
    summary: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def tables_dir(self) -> Path:
        return self.out_dir / "tables"

    @property
    def names(self) -> list[str]:
        """The tables present in this output."""
        return [name for name in ALL_TABLES if (self.tables_dir / name).is_dir()]

    @property
    def as_of_ms(self) -> int:
        return int(self.summary.get("as_of_ms") or 0)

    @property
    def verdict(self) -> str:
        return str(self.summary.get("summary", {}).get("verdict", ""))

    @property
    def late_tolerance_ms(self) -> int:
        return int((self.summary.get("summary", {}).get("options") or {}).get("late_tolerance_ms", 1000))

    def describe(self) -> str:
        """Input, audit time and verdict in one line."""
        return f"{self.summary.get('input')} · audit time {format_time_ms(self.as_of_ms)} · {self.verdict}"

    def dataset(self, name: str) -> ds.Dataset | None:
        """The table as a pyarrow dataset with its declared schema, or None when absent."""
        if name not in ALL_TABLES:
            raise KeyError(f"no table {name!r}; tables are {', '.join(ALL_TABLES)}")
        path = self.tables_dir / name
        return ds.dataset(str(path), format="parquet", schema=ALL_TABLES[name]) if path.is_dir() else None

    def read(self, name: str, where: ds.Expression | None = None, columns: list[str] | None = None) -> pd.DataFrame:
        """Rows of a table matching ``where`` (a pyarrow expression), read from disk."""
        dataset = self.dataset(name)
        if dataset is None:
            table = ALL_TABLES[name].empty_table()
            return _to_pandas(table.select(columns) if columns else table)
        return _to_pandas(dataset.to_table(columns=columns, filter=where))

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            self._cache[name] = self.read(name)
        return self._cache[name]

    def __repr__(self) -> str:
        return f"ScanTables({str(self.out_dir)!r}, tables={self.names})"


def load_scan(out_dir: str | Path) -> ScanTables:
    """Open a scan's output folder: ``summary.json`` and ``tables/<table>/``."""
    root = Path(out_dir).expanduser()
    if not (root / "summary.json").is_file() or not (root / "tables").is_dir():
        raise UsageError(f"{root} is not a txn-audit scan output: it needs summary.json and tables/ "
                         "(write one with `txn-audit scan DUMP --out DIR`)")
    try:
        summary = json.loads((root / "summary.json").read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"{root / 'summary.json'} is unreadable: {err}") from err
    return ScanTables(root, summary)


@dataclass(frozen=True)
class Target:
    """A partition, and optionally one producer on it, to investigate."""

    topic: str
    partition: int
    producer_id: int | None = None
    reason: str = ""

    def __str__(self) -> str:
        who = "" if self.producer_id is None else f", producer {self.producer_id}"
        return f"{self.topic}-{self.partition}{who}" + (f" ({self.reason})" if self.reason else "")


def _where(topic: str, partition: int, producer_id: int | None = None) -> ds.Expression:
    expr = (pc.field("topic") == topic) & (pc.field("partition") == partition)
    return expr if producer_id is None else expr & (pc.field("producer_id") == producer_id)


def _keys(df: pd.DataFrame) -> set[tuple[str, int]]:
    return {(str(t), int(p)) for t, p in zip(df["topic"], df["partition"], strict=True)
            if not _missing(t) and not _missing(p)}


def choose_target(scan: ScanTables, topic: str | None = None, partition: int | None = None,
                  producer_id: int | None = None) -> Target:
    """The partition (and producer) to look at: what is given, the rest filled in.

    Missing parts come from the most serious finding, preferring partitions with transactions
    (without findings: the partition holding back the most records, then the busiest one);
    the producer from that finding, else the partition's producer with an open transaction,
    else its busiest one. A partition or producer that the scan does not know is an error.
    """
    ptx = scan["partition_transactions"]
    known = _keys(ptx) | _keys(scan["partition_stability"]) | _keys(scan["partition_offsets"])
    if topic is not None and topic not in {t for t, _ in known}:
        raise UsageError(f"topic {topic!r} is not in this scan; topics: {', '.join(sorted({t for t, _ in known}))}")
    if partition is not None and topic is not None and (topic, int(partition)) not in known:
        raise UsageError(f"partition {topic}-{partition} is not in this scan")

    def matches(df: pd.DataFrame) -> pd.Series:
        keep = df["topic"].notna() & df["partition"].notna()
        if topic is not None:
            keep &= df["topic"] == topic
        if partition is not None:
            keep &= df["partition"] == int(partition)
        if producer_id is not None:
            keep &= df["producer_id"] == int(producer_id)
        return keep.fillna(False).astype(bool)

    with_txns = _keys(ptx)
    findings = scan["findings"]
    findings = findings[matches(findings)]
    ranked = sorted(rows(findings), key=lambda r: ((r["topic"], r["partition"]) not in with_txns,
                                                   _severity_rank(r["severity"]), r["producer_id"] is None))
    if ranked:
        top = ranked[0]
        where = (str(top["topic"]), int(top["partition"]))
        reason = f"{top['severity']} {top['kind']}"
        finding_producer = top["producer_id"]
    else:
        candidates = ptx[matches(ptx)]
        if candidates.empty and topic is not None and partition is not None:
            where, reason, finding_producer = (topic, int(partition)), "no transactions", None
        elif candidates.empty:
            given = (("topic", topic), ("partition", partition), ("producer_id", producer_id))
            wanted = " ".join(f"{k}={v}" for k, v in given if v is not None)
            raise UsageError(f"no transactions in this scan{' for ' + wanted if wanted else ''}")
        else:
            stability = scan["partition_stability"]
            held = {(str(r["topic"]), int(r["partition"])): r["held_records"] or 0 for r in rows(stability)}
            sizes = candidates.groupby(["topic", "partition"]).size()
            where = max(sizes.index, key=lambda k: (held.get((str(k[0]), int(k[1])), 0), sizes[k], k))
            where = (str(where[0]), int(where[1]))
            reason = "holds back the most records" if held.get(where, 0) else "most transactions"
            finding_producer = None
    if producer_id is not None:
        wrote = scan.read("batches", _where(*where, int(producer_id)), columns=["base_offset"])
        if wrote.empty and not ((ptx["topic"] == where[0]) & (ptx["partition"] == where[1])
                                & (ptx["producer_id"] == int(producer_id))).any():
            raise UsageError(f"producer {producer_id} wrote nothing to {where[0]}-{where[1]} in this scan")
        return Target(*where, int(producer_id), reason)
    if finding_producer is not None:
        return Target(*where, int(finding_producer), reason)
    here = ptx[(ptx["topic"] == where[0]) & (ptx["partition"] == where[1])]
    if here.empty:
        return Target(*where, None, reason)
    open_ = here[here["state"] == "open"]
    pool = open_ if not open_.empty else here
    busiest = pool.groupby("producer_id").size().sort_values(ascending=False, kind="stable")
    return Target(*where, int(busiest.index[0]), reason)


@dataclass(frozen=True)
class PartitionView:
    """Everything a scan holds about one partition (and one producer, when ``producer_id`` is set)."""

    target: Target
    stability: pd.DataFrame  # partition_stability row(s)
    transactions: pd.DataFrame  # partition_transactions, by producer then sequence
    markers: pd.DataFrame  # control_markers, by offset
    batches: pd.DataFrame  # data batches (control batches are the markers), by offset
    findings: pd.DataFrame  # the partition's findings (with a producer: its own and partition-wide ones)
    coordinator: pd.DataFrame  # the producers' rows of the transactions table
    txn_log: pd.DataFrame  # __transaction_state records of their transactional ids

    def counts(self) -> dict[str, int]:
        return {"transactions": len(self.transactions), "open": int((self.transactions["state"] == "open").sum()),
                "markers": len(self.markers), "batches": len(self.batches), "findings": len(self.findings)}

    def describe(self) -> str:
        """One line: ``topic=... partition=... producer_id=... transactions=N markers=N ...``."""
        t = self.target
        head = f"topic={t.topic} partition={t.partition} producer_id={t.producer_id}"
        return head + " " + " ".join(f"{k}={v}" for k, v in self.counts().items())


def partition_view(scan: ScanTables, target: Target) -> PartitionView:
    """The rows of every table that concern ``target``."""
    where = _where(target.topic, target.partition, target.producer_id)
    partition_only = _where(target.topic, target.partition)
    transactions = scan.read("partition_transactions", where).sort_values(["producer_id", "txn_seq"])
    markers = scan.read("control_markers", where).sort_values(["offset", "broker_id"])
    batches = scan.read("batches", where & (pc.field("is_control") == pa.scalar(False)))
    batches = batches.sort_values(["base_offset", "broker_id"])
    findings = scan.read("findings", partition_only)
    if target.producer_id is not None:
        findings = findings[(findings["producer_id"] == target.producer_id).fillna(True).astype(bool)]
    findings = findings.sort_values("severity", key=lambda s: s.map(_severity_rank), kind="stable")
    producers = sorted({int(p) for p in transactions["producer_id"]} | (
        set() if target.producer_id is None else {target.producer_id}))
    coordinator = scan.read("transactions", pc.field("producer_id").isin(producers)) if producers else \
        scan.read("transactions").iloc[0:0]
    ids = sorted({str(i) for i in transactions["transactional_id"].dropna()})
    txn_log = scan.read("txn_log", pc.field("transactional_id").isin(ids)) if ids else scan.read("txn_log").iloc[0:0]
    return PartitionView(
        target=target,
        stability=scan.read("partition_stability", partition_only).reset_index(drop=True),
        transactions=transactions.reset_index(drop=True),
        markers=markers.reset_index(drop=True),
        batches=batches.reset_index(drop=True),
        findings=findings.reset_index(drop=True),
        coordinator=coordinator.reset_index(drop=True),
        txn_log=txn_log.sort_values(["transactional_id", "offset"]).reset_index(drop=True),
    )


def _title(view: PartitionView, what: str) -> str:
    return f"{view.target.topic}-{view.target.partition}" + (
        "" if view.target.producer_id is None else f", producer {view.target.producer_id}") + f": {what}"


def timeline_figure(view: PartitionView, as_of_ms: int, *, max_rows: int = 200) -> go.Figure | None:
    """The partition's transactions in time: bars from first write to marker, the markers,
    late records; open transactions run to the audit time."""
    fig, _ = figures.timeline_figure(
        rows(view.transactions), as_of_ms, max_rows=max_rows, chronological=True, show_markers=True,
        title=_title(view, f"transactions up to the audit time {format_time_ms(as_of_ms)}"))
    return fig


def offsets_figure(view: PartitionView) -> go.Figure | None:
    """The partition's transactions on the offset axis, with log start, LSO, high watermark and findings."""
    stability = rows(view.stability)
    fig = figures.offsets_figure(rows(view.transactions), stability[0] if stability else None, rows(view.findings))
    if fig is not None:
        fig.update_layout(title=_title(view, "transactions on the offset axis"))
    return fig


def batches_figure(view: PartitionView) -> go.Figure | None:
    """Each data batch at (offset, creation time) and each marker: a batch created before the
    marker just below it in offset is a late arrival."""
    if view.batches.empty and view.markers.empty:
        return None
    fig = go.Figure()
    for transactional, subset in view.batches.groupby("is_transactional", sort=False):
        fig.add_scatter(name="transactional batch" if transactional else "non-transactional batch", mode="markers",
                        x=list(subset["base_offset"]), y=list(subset["first_timestamp"]),
                        hovertext=[f"producer {p} epoch {e}, offsets {b}-{last}, {n} records" for p, e, b, last, n in
                                   zip(subset["producer_id"], subset["producer_epoch"], subset["base_offset"],
                                       subset["last_offset"], subset["record_count"], strict=True)])
    for marker_type, subset in view.markers.groupby("marker_type", sort=True):
        fig.add_scatter(name=f"{marker_type} marker", mode="markers", x=list(subset["offset"]),
                        y=list(subset["timestamp"]),
                        marker={"symbol": "diamond", "size": 10,
                                "color": figures.OUTCOME_COLOURS.get(str(marker_type), "#333")},
                        hovertext=[f"producer {p} epoch {e}" for p, e in
                                   zip(subset["producer_id"], subset["producer_epoch"], strict=True)])
    fig.update_layout(title=_title(view, "batch creation time by offset"), xaxis={"title": "offset"},
                      yaxis={"title": "time (UTC)"})
    return fig


def stability_figure(scan: ScanTables) -> go.Figure | None:
    """High watermark vs last stable offset of every partition of the scan."""
    table = scan["partition_stability"].sort_values(["topic", "partition"])
    return figures.stability_figure(rows(table))


# -- the nightly warehouse -----------------------------------------------------------------


def _parquet_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix == ".parquet" and not p.name.startswith(("_", ".")))


def load_history(warehouse: str | Path) -> dict[str, pd.DataFrame]:
    """Every table of the warehouse with an ``audit_date`` column, plus ``runs``: one row per
    audit date from its ``summary.json`` (verdict, finding counts, audit time). Every date's
    tables have the current schemas (``schemas.ALL_TABLES``): a date written with an earlier
    version (its run manifest says which, ``warehouse.schema_version``) is migrated as it is read
    (``txn_audit.migrate``): its renamed columns under their names, its times as timestamps.

    Only dates whose run is complete are read; hidden folders (a publish under way) are ignored.
    """
    root = wh.resolve(warehouse)
    if not root.is_dir():
        raise UsageError(f"warehouse {root} does not exist")
    dates = wh.audit_dates(root)
    if not dates:
        raise UsageError(f"{root} is not a txn-audit warehouse: no {wh.RUNS}/{wh.PARTITION_COLUMN}=YYYY-MM-DD/ "
                         "folder (the nightly job writes them)")
    date_field = pa.field(wh.PARTITION_COLUMN, pa.date32())
    versions = {d: wh.schema_version(root, d) for d in dates}
    history: dict[str, pd.DataFrame] = {}
    for name, schema in ALL_TABLES.items():
        parts = []
        for d in dates:
            files = [str(f) for f in _parquet_files(root / name / wh.partition_name(d))]
            if not files:
                continue
            # a date of the current schemas read with them; an older one as written, then migrated
            written = ds.dataset(files, format="parquet", schema=schema if versions[d] == SCHEMA_VERSION else None)
            table = migrate(name, written.to_table(), versions[d])
            parts.append(table.append_column(date_field, pa.array([d] * table.num_rows, pa.date32())))
        full = schema.append(date_field)
        frame = _to_pandas(pa.concat_tables(parts) if parts else full.empty_table())
        frame[wh.PARTITION_COLUMN] = pd.to_datetime(frame[wh.PARTITION_COLUMN])
        history[name] = frame.sort_values(wh.PARTITION_COLUMN, kind="stable").reset_index(drop=True)
    history[wh.RUNS] = _runs(root, dates)
    return history


def _runs(root: Path, dates: list[date]) -> pd.DataFrame:
    records = []
    for d in dates:
        path = root / wh.RUNS / wh.partition_name(d) / "summary.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = {}
        summary = doc.get("summary", {})
        by_severity = summary.get("findings_by_severity", {})
        records.append({
            wh.PARTITION_COLUMN: pd.Timestamp(d), "verdict": summary.get("verdict"), "as_of_ms": doc.get("as_of_ms"),
            "input": doc.get("input"), "partitions": summary.get("partitions"),
            "partitions_with_lso_below_hw": summary.get("partitions_with_lso_below_hw"),
            **{s: by_severity.get(s, 0) for s in SEVERITY_ORDER},
        })
    return pd.DataFrame.from_records(records)


def _run_dates(history: dict[str, pd.DataFrame]) -> pd.DatetimeIndex:
    runs = history.get(wh.RUNS)
    dates = [] if runs is None else list(runs[wh.PARTITION_COLUMN])
    return pd.DatetimeIndex(sorted(dates), name=wh.PARTITION_COLUMN)


def findings_by_date(history: dict[str, pd.DataFrame], by: str = "severity") -> pd.DataFrame:
    """Finding counts per audit date (rows, every run's date, zeros included), one column per
    ``by`` value (``severity``: most serious first; ``kind``: most frequent first)."""
    if by not in ("severity", "kind"):
        raise UsageError(f"by must be 'severity' or 'kind', not {by!r}")
    findings = history["findings"]
    counts = findings.groupby([wh.PARTITION_COLUMN, by]).size().unstack(by, fill_value=0) if not findings.empty \
        else pd.DataFrame()
    dates = _run_dates(history).union(pd.DatetimeIndex(counts.index))
    counts = counts.reindex(dates, fill_value=0)
    counts.index.name = wh.PARTITION_COLUMN
    if by == "severity":
        order = [s for s in SEVERITY_ORDER if s in counts.columns] + sorted(set(counts.columns) - set(SEVERITY_ORDER))
    else:
        order = list(counts.sum().sort_values(ascending=False, kind="stable").index) if len(counts.columns) else []
    counts = counts[order].astype("int64")
    counts.columns.name = by
    return counts


def lso_lag(history: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per partition and audit date: high watermark, last stable offset, and ``lso_lag`` =
    the HW the LSO is computed against (``effective_high_watermark``: the log end when the dump
    holds no HW) − last stable offset (the records consumers reading committed data cannot see);
    ``lso_lag`` > 0 exactly where ``partition_stability.lso_below_hw``."""
    stability = history["partition_stability"]
    columns = [wh.PARTITION_COLUMN, "topic", "partition", "broker_id", "high_watermark", "effective_high_watermark",
               "last_stable_offset", "lso_below_hw", "held_records", "held_ms", "culprit_producer_id",
               "culprit_transactional_id"]
    lag = stability.reindex(columns=columns).copy()  # dates published before the status columns lack them
    # the high watermark alone where an older date has no effective one
    lag["effective_high_watermark"] = lag["effective_high_watermark"].fillna(lag["high_watermark"])
    lag["lso_lag"] = lag["effective_high_watermark"] - lag["last_stable_offset"]
    return lag.sort_values([wh.PARTITION_COLUMN, "topic", "partition"]).reset_index(drop=True)


def describe_history(history: dict[str, pd.DataFrame]) -> str:
    """One line: ``audit_dates=D1,D2 findings=N1,N2 lagging_partitions=N1,N2`` (oldest first)."""
    dates = _run_dates(history)
    per_date = findings_by_date(history).sum(axis=1).reindex(dates, fill_value=0)
    lag = lso_lag(history)
    lagging = lag[lag["lso_lag"].fillna(0) > 0].groupby(wh.PARTITION_COLUMN).size().reindex(dates, fill_value=0)
    return (f"audit_dates={','.join(d.date().isoformat() for d in dates)} "
            f"findings={','.join(str(int(n)) for n in per_date)} "
            f"lagging_partitions={','.join(str(int(n)) for n in lagging)}")


FINDING_KEY = ["kind", "topic", "partition", "producer_id", "first_offset"]


def new_findings(history: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Findings of the latest audit date that the date before did not have (same kind,
    partition, producer and first offset); all of them when there is one date."""
    findings = history["findings"]
    dates = _run_dates(history).union(pd.DatetimeIndex(findings[wh.PARTITION_COLUMN].unique()))
    if dates.empty:
        return findings.iloc[0:0]
    today = findings[findings[wh.PARTITION_COLUMN] == dates[-1]]
    if len(dates) == 1:
        return today.reset_index(drop=True)
    before = findings[findings[wh.PARTITION_COLUMN] == dates[-2]]

    def key(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        return [tuple(None if _missing(v) else v for v in r) for r in frame[FINDING_KEY].itertuples(index=False)]

    seen = set(key(before))
    return today[[k not in seen for k in key(today)]].reset_index(drop=True)


def findings_trend_figure(history: dict[str, pd.DataFrame], by: str = "severity") -> go.Figure | None:
    """Stacked finding counts per audit date, by severity or kind."""
    return figures.findings_trend_figure(findings_by_date(history, by), title=f"Findings per audit date, by {by}")


def lso_lag_figure(history: dict[str, pd.DataFrame], *, only_lagging: bool = True) -> go.Figure | None:
    """LSO lag per partition over audit dates (``only_lagging``: partitions that lagged on some date)."""
    lag = lso_lag(history)
    if only_lagging:
        lagging = lag[lag["lso_lag"].fillna(0) > 0][["topic", "partition"]].drop_duplicates()
        lag = lag.merge(lagging, on=["topic", "partition"])
    return figures.lso_lag_figure(lag.dropna(subset=["lso_lag"]))
