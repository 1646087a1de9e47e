"""Great Expectations suites over the raw and derived tables.

``validate_tables`` runs one suite per table (the checks of ``checks.py``), saves the results
as ``results.json`` and renders Data Docs that read offline; ``SuiteRun`` does the same for
tables given in parts (a scan checks the raw tables while it builds the derived ones). A
failing expectation is a result, and where it means a broken invariant in the data a finding,
never an exception.
"""

from __future__ import annotations

import functools
import json
from html import escape as html_escape
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txn_audit.manifest import Manifest, TableManifest
from txn_audit.outputs import write_json_atomic
from txn_audit.quality import assets
from txn_audit.quality.checks import BATCH_VIEW, CHECKS, ROW_RULES, Check, row_faults_view
from txn_audit.quality.epoch_order import EPOCH_FALLS, falls_frame
from txn_audit.quality.replica_order import neighbours_frame
from txn_audit.quality.row_faults import faults_frame
from txn_audit.tuning.imports import DEFERRED_MODULES, import_great_expectations

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHECKS", "DEFERRED_MODULES", "QualityResult", "SuiteRun", "TABLE_ORDER", "import_great_expectations",
           "validate_tables"]

SAMPLE_ROWS = 5


@dataclass
class CheckResult:
    table: str
    check: str
    rule: str
    expectation: str
    success: bool
    unexpected_count: int | None
    examples: list[dict[str, Any]]
    data_health: bool
    severity: str
    error: str | None = None


@dataclass
class QualityResult:
    results: list[CheckResult]
    docs_index: Path | None
    tables: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(r.success for r in self.results)

    @property
    def statistics(self) -> dict[str, int]:
        return {"evaluated": len(self.results), "successful": sum(r.success for r in self.results),
                "failed": sum(not r.success for r in self.results)}

    def to_json(self) -> dict[str, Any]:
        return {"success": self.success, "statistics": self.statistics, "tables": self.tables,
                "docs": "docs/index.html" if self.docs_index else None,
                "results": [r.__dict__ for r in self.results]}

    def findings(self) -> list[dict[str, Any]]:
        """``invariant_violation`` rows (``schemas.FINDINGS``) for failed checks that mean the
        tables contradict Kafka's invariants; dump damage is already reported by detection."""
        rows = []
        for r in self.results:
            if r.success or r.data_health:
                continue
            example = r.examples[0] if r.examples else {}
            where = ""
            if example.get("topic") is not None:
                where = f"; e.g. {example['topic']}-{example.get('partition')}"
                for key in ("base_offset", "offset", "first_offset"):
                    if example.get(key) is not None:
                        where += f" at offset {example[key]}"
                        break
            count = "?" if r.unexpected_count is None else str(r.unexpected_count)
            evidence = (f"data-quality check {r.table}.{r.check} failed: {r.rule} does not hold "
                        f"({count} row(s){where})" + (f": {r.error}" if r.error else ""))
            rows.append({
                "kind": "invariant_violation", "severity": r.severity,
                "topic": example.get("topic"), "partition": example.get("partition"),
                "broker_id": example.get("broker_id"), "producer_id": example.get("producer_id"),
                "producer_epoch": None, "transactional_id": None,
                "first_offset": next((example[k] for k in ("base_offset", "offset", "first_offset")
                                      if example.get(k) is not None), None),
                "last_offset": None, "first_timestamp": None, "last_timestamp": None,
                "evidence": evidence, "remediation": None, "remediation_pre_3_0": None, "file": None,
                "incident_id": None,
            })
        return rows


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "asDict"):
        return _json_safe(value.asDict())
    return value


def _examples(result: dict[str, Any]) -> tuple[int | None, list[dict[str, Any]]]:
    if "observed_value" in result and "unexpected_count" not in result:  # UnexpectedRowsExpectation
        rows = (result.get("details") or {}).get("unexpected_rows") or []
        observed = result.get("observed_value")
        found = int(observed) if isinstance(observed, int | float) else len(rows)
        return found, [_json_safe(r) for r in rows[:SAMPLE_ROWS]]
    count = result.get("unexpected_count")
    values = result.get("partial_unexpected_list") or []
    return (None if count is None else int(count)), [{"value": _json_safe(v)} for v in values[:SAMPLE_ROWS]]


def _over(query: str, view: str) -> str:
    """A row check's query over the table registered as ``view``, substituted as GX does."""
    return query.format(batch=view)


#: the views a check may read besides its table (``Check.companions``), each built from the table
#: and, when the table's frame reads the files ingest wrote as they are, their manifest
COMPANIONS: dict[str, Callable[[DataFrame, TableManifest | None], DataFrame]] = {
    "replica_neighbours": neighbours_frame,
    **{name: functools.partial(falls_frame, order) for name, order in EPOCH_FALLS.items()},
    **{row_faults_view(table): functools.partial(faults_frame, table)
       for table in dict.fromkeys(rule.table for rule in ROW_RULES)},
}


def _with_companions(frame: DataFrame, view: str, checks: list[Check],
                     files: TableManifest | None = None) -> dict[str, DataFrame]:
    """Register ``frame`` as ``view`` and each companion ``checks`` read as ``<view>_<name>``,
    cached when several checks read it (caching one that one check reads costs a little and
    saves nothing); every view registered, by name, for ``_drop_views``.

    The row checks of a suite are counted in one query (``checks.row_counts``), a union of theirs.
    Spark uses a cached result wherever a plan holds it, so a companion (the faults of a table's
    rules on one row, a window or a pass over every row) is computed once for all the checks that
    read it, not once in each branch of the union; what is cached is only what it selects, usually
    no row. Should the metric name its view differently, the plans differ and the caches go
    unused: slower, never different results."""
    views = {view: frame}
    readers = Counter(name for check in checks for name in check.companions)
    for name, count in readers.items():
        companion = COMPANIONS[name](frame, files)
        if count > 1:
            companion = companion.cache()
        companion.createOrReplaceTempView(f"{view}_{name}")
        views[f"{view}_{name}"] = companion
    frame.createOrReplaceTempView(view)
    return views


def _drop_views(views: dict[str, DataFrame]) -> None:
    """Drop the views ``_with_companions`` registered and release the companions' caches (the
    table's own frame belongs to the caller and is left as it is)."""
    for index, (name, frame) in enumerate(views.items()):
        if index:
            frame.unpersist()
        frame.sparkSession.catalog.dropTempView(name)


def _offending_rows(spark: SparkSession, query: str) -> list[dict[str, Any]]:
    """A few rows a failed row check found (GX's SUMMARY results carry only their count), read
    by its query over the views of the suite still running (``_with_companions``): a companion
    read by several checks is cached there, so the query reads its few rows, not the table."""
    try:
        found = spark.sql(_over(query, BATCH_VIEW))
        # ordered so the examples, and the findings quoting them, are the same on every run
        keys = [f.name for f in found.schema.fields if f.dataType.typeName() != "map"]
        rows = found.orderBy(*keys).limit(SAMPLE_ROWS).collect()
        return [_json_safe(r.asDict(recursive=True)) for r in rows]
    except Exception:  # noqa: BLE001 - examples are a courtesy; the count stands without them
        return []


def _outcome(result: Any, spark: SparkSession) -> tuple[int | None, list[dict[str, Any]], str | None]:
    """A suite result's count of offending rows, a few of them, and its error if it raised;
    the examples of a failed row check are fetched (``_offending_rows``) while its suite runs."""
    info = result.exception_info or {}
    error = str(info.get("exception_message") or "expectation raised") if info.get("raised_exception") else None
    count, examples = _examples(dict(result.result or {}))
    config = result.expectation_config
    query = None if config is None else (config.kwargs or {}).get("unexpected_rows_query")
    if not result.success and not examples and query and error is None:
        examples = _offending_rows(spark, query)
    return count, examples, error


def _site_config(docs_dir: Path) -> dict[str, Any]:
    return {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,  # no vendor tutorial footer, no walkthrough pop-up
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
    }


_REMOTE_CSS = re.compile(r"@import\s+url\([^)]*https?://[^)]*\)\s*;?|url\(\s*[\"']?https?://[^)]*\)", re.IGNORECASE)


def _static_index(docs_dir: Path, results: list[CheckResult]) -> str:
    """Links to every validation page, for an index whose scripts (which list them) are dropped."""
    status: dict[str, list[bool]] = {}
    for r in results:
        status.setdefault(r.table, []).append(r.success)
    items = []
    for page in sorted(docs_dir.glob("validations/*/**/*.html")):
        table = page.relative_to(docs_dir).parts[1]
        ok = status.get(table, [])
        label = f"{sum(ok)}/{len(ok)} checks passed" if ok else "not run"
        css = "text-success" if ok and all(ok) else "text-danger"
        items.append(f"<li><a href='{page.relative_to(docs_dir).as_posix()}'>{html_escape(table)}</a> "
                     f"<span class='{css}'>{label}</span></li>")
    return "<section><h2>Validation results</h2><ul>" + "".join(items) + "</ul></section>"


def _make_offline(docs_dir: Path, results: list[CheckResult]) -> None:
    """Bundle the pages' styles, fonts and scripts (``assets.bundle``) and point every page at
    them (``assets.localise``): they render as Great Expectations draws them, with no network.
    Without the assets installed the pages are left as static documents, every script and
    remote tag dropped and the index listing each validation page (``_static_index``)."""
    vendor = assets.bundle(docs_dir / "static")
    for sheet in docs_dir.rglob("*.css"):
        if vendor is None or not sheet.is_relative_to(vendor):
            css = sheet.read_text(encoding="utf-8", errors="replace")
            sheet.write_text(_REMOTE_CSS.sub("none", css), encoding="utf-8")
    for page in docs_dir.rglob("*.html"):
        html = assets.localise(page.read_text(encoding="utf-8"), page, vendor)
        if vendor is None and page == docs_dir / "index.html":
            html = html.replace("</body>", _static_index(docs_dir, results) + "</body>", 1)
        page.write_text(_REMOTE_CSS.sub("none", html), encoding="utf-8")
    if vendor is None:
        print(f"txn-audit: the Data Docs' styles are not installed ({len(assets.missing())} files missing: "
              "scripts/ensure-docs-assets.sh); their pages are written unstyled", file=sys.stderr)


def validate_tables(spark: SparkSession, tables: Mapping[str, DataFrame], out_dir: Path, *,
                    manifest: Manifest | None = None) -> QualityResult:
    """Run the suite of every table given; write ``out_dir/results.json`` and ``out_dir/docs/``.
    ``manifest``: that of the raw tables' files (``txn_audit.manifest``), when ``tables`` read
    them as they are; the checks that read a table's replicas in order then read its files."""
    run = SuiteRun(out_dir)
    run.validate(tables, manifest=manifest)
    return run.finish()


#: the order of the tables in the results: that of their first check in ``CHECKS``
TABLE_ORDER = tuple(dict.fromkeys(check.table for check in CHECKS))


class SuiteRun:
    """The suites of one run, in one Great Expectations context, over tables given in one or more
    parts (``validate``), then saved (``finish``): a scan checks the raw tables while it builds
    the derived ones, and those after. One part at a time: ``validate`` is not re-entrant."""

    def __init__(self, out_dir: Path) -> None:
        import_great_expectations()
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.out_dir = out_dir
        self.results: list[CheckResult] = []
        self.tables: set[str] = set()
        out_dir.mkdir(parents=True, exist_ok=True)
        self.docs_dir = out_dir / "docs"
        shutil.rmtree(self.docs_dir, ignore_errors=True)
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        # GX types site_config as a TypedDict; its documented configs are plain dicts like this one
        self.context.add_data_docs_site(site_name="txn_audit", site_config=_site_config(self.docs_dir))  # type: ignore[arg-type]
        self.source = self.context.data_sources.add_spark(name="txn_audit", persist=False)

    def validate(self, tables: Mapping[str, DataFrame], *, manifest: Manifest | None = None) -> None:
        """Run the suite of every table given (each table once in a run). ``manifest``: that of
        the raw tables' files (``txn_audit.manifest``), when ``tables`` read them as they are; the
        checks that read a table's replicas in order then read its files."""
        import great_expectations as gx

        context = self.context
        by_table: dict[str, list[Check]] = {}
        for check in CHECKS:
            if check.table in tables:
                by_table.setdefault(check.table, []).append(check)
        self.tables.update(by_table)
        results = self.results
        for table, checks in by_table.items():
            batch = self.source.add_dataframe_asset(name=table).add_batch_definition_whole_dataframe("whole")
            suite = context.suites.add(gx.ExpectationSuite(name=table))
            # every row check of the suite is counted in one Spark query (``checks.row_counts``)
            queries = tuple(dict.fromkeys(check.query for check in checks if check.query is not None))
            for check in checks:
                suite.add_expectation(check.build({"check": check.name, "rule": check.rule}, queries))
            definition = context.validation_definitions.add(gx.ValidationDefinition(name=table, data=batch,
                                                                                    suite=suite))
            checkpoint = context.checkpoints.add(gx.Checkpoint(
                name=f"{table}_checkpoint", validation_definitions=[definition],
                actions=[],
                result_format={"result_format": "SUMMARY"},
            ))
            by_name = {c.name: c for c in checks}
            views: dict[str, DataFrame] = {}
            try:
                views = _with_companions(tables[table], BATCH_VIEW, checks, files=_files(manifest, table))
                run = checkpoint.run(batch_parameters={"dataframe": tables[table]})
                suite_results = [r for v in run.run_results.values() for r in v.results]
                outcomes = [_outcome(r, tables[table].sparkSession) for r in suite_results]
            except Exception as err:  # noqa: BLE001 - one broken suite must not stop the others
                results.extend(CheckResult(table, c.name, c.rule, "suite", False, None, [], c.data_health, c.severity,
                                           error=f"{type(err).__name__}: {err}") for c in checks)
                continue
            finally:
                _drop_views(views)
            for r, (count, examples, error) in zip(suite_results, outcomes, strict=True):
                config = r.expectation_config
                found = None if config is None else by_name.get((config.meta or {}).get("check", ""))
                if config is None or found is None:
                    continue
                results.append(CheckResult(table, found.name, found.rule, config.type, bool(r.success), count,
                                           examples, found.data_health, found.severity, error))

    def finish(self) -> QualityResult:
        """Render the Data Docs once for every suite run, save ``results.json`` (results in
        ``TABLE_ORDER``, whichever part checked them) and return the outcome."""
        docs_dir = self.docs_dir
        results = sorted(self.results, key=lambda r: TABLE_ORDER.index(r.table))
        self.context.build_data_docs(site_names=["txn_audit"])  # once for all suites, not once per suite
        docs_index = docs_dir / "index.html"
        if docs_index.is_file():
            _make_offline(docs_dir, results)
        outcome = QualityResult(results=results, docs_index=docs_index if docs_index.is_file() else None,
                                tables=sorted(self.tables))
        write_json_atomic(self.out_dir / "results.json", outcome.to_json())
        return outcome


def _files(manifest: Manifest | None, table: str) -> TableManifest | None:
    return None if manifest is None else manifest.table(table)


def load_results(path: Path) -> dict[str, Any] | None:
    """The saved ``results.json``, or None when the checks were not run."""
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
