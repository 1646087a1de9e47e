"""The notebooks run end to end on the sample scan and the two-night warehouse, with their
parameters injected by papermill, in a kernel running this interpreter."""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
import pyarrow.compute as pc
import pytest

from tests.notebooks.conftest import EARLIER, LATER, RESOLVED_KIND, Warehouse, read_table

if TYPE_CHECKING:
    from tests.conftest import SampleScan

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
REMOTE = re.compile(r"""<script[^>]*\bsrc\s*=\s*["']?(?:https?:)?//|<link[^>]*\bhref\s*=\s*["']?(?:https?:)?//""",
                    re.IGNORECASE)
CELL_TIMEOUT_S = 120


def _execute(name: str, tmp: Path, **parameters: Any) -> Any:
    import papermill

    out = tmp / name
    papermill.execute_notebook(str(NOTEBOOKS / name), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(tmp), progress_bar=False, execution_timeout=CELL_TIMEOUT_S)
    return nbformat.read(out, as_version=4)


def _outputs(nb: Any) -> list[Any]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def _stdout(nb: Any) -> str:
    return "".join(o.text for o in _outputs(nb) if o.output_type == "stream" and o.name == "stdout")


def _fields(line_prefix: str, text: str) -> dict[str, str]:
    line = next(line for line in text.splitlines() if line.startswith(line_prefix))
    return dict(part.split("=", 1) for part in line.split())


def _figures(nb: Any) -> list[dict[str, Any]]:
    return [o.data[PLOTLY] for o in _outputs(nb) if o.output_type == "display_data" and PLOTLY in o.get("data", {})]


def _check_clean(nb: Any, min_figures: int) -> None:
    errors = [f"{o.ename}: {o.evalue}" for o in _outputs(nb) if o.output_type == "error"]
    assert not errors
    assert not [o for o in _outputs(nb) if o.output_type == "stream" and o.name == "stderr" and "Traceback" in o.text]
    assert len(_figures(nb)) >= min_figures
    for o in _outputs(nb):
        assert not REMOTE.search(str(o.get("data", {}).get("text/html", ""))), "an output loads from the network"
    tags = [cell.metadata.get("tags", []) for cell in nb.cells if cell.cell_type == "code"]
    assert tags[0] == ["parameters"] and tags[1] == ["injected-parameters"]


def _expected_counts(tables: Path, topic: str, partition: int, producer: int) -> dict[str, str]:
    where = (pc.field("topic") == topic) & (pc.field("partition") == partition)
    mine = where & (pc.field("producer_id") == producer)
    ptx = read_table(tables, "partition_transactions", mine)
    findings = [f for f in read_table(tables, "findings", where).to_pylist() if f["producer_id"] in (None, producer)]
    return {
        "transactions": str(ptx.num_rows),
        "open": str(ptx["state"].to_pylist().count("open")),
        "markers": str(read_table(tables, "control_markers", mine).num_rows),
        "batches": str(read_table(tables, "batches", mine & ~pc.field("is_control")).num_rows),
        "findings": str(len(findings)),
    }


@pytest.mark.live
def test_kernel_is_this_interpreter(tmp_path: Path) -> None:
    import papermill

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nbformat.write(nb, tmp_path / "probe.ipynb")
    papermill.execute_notebook(str(tmp_path / "probe.ipynb"), str(tmp_path / "done.ipynb"), kernel_name="python3",
                               progress_bar=False)
    ran = _stdout(nbformat.read(tmp_path / "done.ipynb", as_version=4)).strip()
    assert os.path.realpath(ran) == os.path.realpath(sys.executable)


def test_notebooks_are_stored_without_outputs() -> None:
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert all(not cell.outputs and cell.execution_count is None for cell in code), path.name
        assert code[0].metadata.get("tags") == ["parameters"], path.name
        assert "from txn_audit import explore" in "".join(cell.source for cell in code), path.name
    assert {p.name for p in NOTEBOOKS.glob("*.ipynb")} >= {"investigate_partition.ipynb", "nightly_trends.ipynb"}


def _drawn_outside_jupyter(browser: Any, nb: Any, tmp: Path) -> list[int]:
    """The notebook's figures as a page of their ``text/html`` outputs alone (as an HTML export
    shows them, without plotly's Jupyter renderer): the traces each figure drew in Chromium."""
    from tests.browser import Visit, open_page

    html = [o.data["text/html"] for o in _outputs(nb) if o.output_type == "display_data" and PLOTLY in o.data]
    assert len(html) == len(_figures(nb)), "a figure has no text/html beside its plotly JSON"
    page_file = tmp / "outputs.html"
    page_file.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "".join(html)
                         + "</body></html>")
    visit = Visit()
    page = open_page(browser, page_file, visit)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    traces: list[int] = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map("
                                      "gd => gd.querySelectorAll('.trace').length)")
    assert visit.outside == [] and visit.console_errors == [], (visit.outside, visit.console_errors)
    page.context.close()
    return traces


@pytest.mark.live
def test_investigate_partition_default_target(tmp_path: Path, sample_scan: SampleScan, browser: Any) -> None:
    nb = _execute("investigate_partition.ipynb", tmp_path, scan_out=str(sample_scan.out))
    _check_clean(nb, min_figures=4)
    drawn = _drawn_outside_jupyter(browser, nb, tmp_path)
    assert len(drawn) == len(_figures(nb)) and all(n > 0 for n in drawn), drawn
    text = _stdout(nb)
    fields = _fields("topic=", text)
    topic, partition, producer = fields["topic"], int(fields["partition"]), int(fields["producer_id"])
    tables = sample_scan.out / "tables"
    # the default is a partition and producer named by one of the most serious findings
    severities = ("info", "warning", "critical")
    findings = read_table(tables, "findings").to_pylist()
    worst = max(severities.index(f["severity"]) for f in findings)
    assert any((f["topic"], f["partition"], f["producer_id"]) == (topic, partition, producer)
               and severities.index(f["severity"]) == worst for f in findings)
    assert {k: fields[k] for k in ("transactions", "open", "markers", "batches", "findings")} == \
        _expected_counts(tables, topic, partition, producer)
    assert f"target: {topic}-{partition}, producer {producer}" in text
    timeline = next(f for f in _figures(nb) if "transactions up to the audit time" in json.dumps(f["layout"]))
    bars = [t for t in timeline["data"] if t["type"] == "bar"]
    assert sum(len(t["y"]) for t in bars) == int(fields["transactions"])


@pytest.mark.live
def test_investigate_partition_with_parameters(tmp_path: Path, sample_scan: SampleScan) -> None:
    tables = sample_scan.out / "tables"
    stability = read_table(tables, "partition_stability").to_pylist()
    held = max(stability, key=lambda r: r["held_records"])
    assert held["held_records"] > 0 and held["culprit_producer_id"] is not None
    topic, partition, producer = held["topic"], held["partition"], held["culprit_producer_id"]
    nb = _execute("investigate_partition.ipynb", tmp_path, scan_out=str(sample_scan.out), topic=topic,
                  partition=partition, producer_id=producer)
    _check_clean(nb, min_figures=4)
    fields = _fields("topic=", _stdout(nb))
    assert (fields["topic"], int(fields["partition"]), int(fields["producer_id"])) == (topic, partition, producer)
    expected = _expected_counts(tables, topic, partition, producer)
    assert {k: fields[k] for k in expected} == expected
    assert int(expected["open"]) > 0  # the culprit's open transaction is there


@pytest.mark.live
def test_nightly_trends(tmp_path: Path, warehouse: Warehouse) -> None:
    nb = _execute("nightly_trends.ipynb", tmp_path, warehouse=str(warehouse.root))
    _check_clean(nb, min_figures=3)
    fields = _fields("audit_dates=", _stdout(nb))
    assert fields["audit_dates"] == f"{EARLIER.isoformat()},{LATER.isoformat()}"
    counts = [read_table(scan / "tables", "findings").num_rows for scan in (warehouse.earlier_scan,
                                                                             warehouse.later_scan)]
    assert fields["findings"] == ",".join(map(str, counts))
    lagging = [sum(r["high_watermark"] > r["last_stable_offset"]
                   for r in read_table(scan / "tables", "partition_stability").to_pylist())
               for scan in (warehouse.earlier_scan, warehouse.later_scan)]
    assert fields["lagging_partitions"] == ",".join(map(str, lagging))
    assert lagging[1] == lagging[0] + 1
    new_cell = next(cell for cell in nb.cells if cell.cell_type == "code" and "new_findings" in cell.source)
    shown = "".join(o.data.get("text/plain", "") for o in new_cell.outputs if o.output_type == "display_data")
    assert RESOLVED_KIND in shown
    names = Counter(trace.get("name") for fig in _figures(nb) for trace in fig["data"])
    assert f"{warehouse.quiet_partition[0]}-{warehouse.quiet_partition[1]}" in names  # its LSO lag line
