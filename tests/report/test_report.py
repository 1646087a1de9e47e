"""The HTML report: self-contained, offline, and it renders in a real headless browser."""

from __future__ import annotations

import io
import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SampleScan
from txn_audit.report import write_report

REMOTE = re.compile(r"""<script[^>]*\bsrc\s*=\s*["']?(?:https?:)?//|<link[^>]*\bhref\s*=\s*["']?(?:https?:)?//""",
                    re.IGNORECASE)


def _chromium() -> str:
    for candidate in (os.environ.get("TXN_AUDIT_CHROMIUM"), "chromium", "chromium-browser"):
        found = candidate and shutil.which(candidate)
        if found:
            return found
    pytest.fail("Chromium is missing: `make test` installs it (scripts/ensure-browser.sh)")


def _offline_launcher(tmp: Path, chromium: str) -> tuple[str, bool]:
    """Chromium inside a network namespace with no interfaces but loopback, when the kernel
    allows it; requests are also intercepted and recorded either way."""
    if subprocess.run(["unshare", "--net", "--map-root-user", "true"], capture_output=True).returncode == 0:
        wrapper = tmp / "chromium-offline"
        wrapper.write_text(f'#!/bin/sh\nexec unshare --net --map-root-user "{chromium}" "$@"\n')
        wrapper.chmod(0o755)
        return str(wrapper), True
    return chromium, False


class Visit:
    def __init__(self) -> None:
        self.outside: list[str] = []
        self.console_errors: list[str] = []


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    launcher, _ = _offline_launcher(tmp_path_factory.mktemp("browser"), _chromium())
    with sync_playwright() as pw:
        instance = pw.chromium.launch(
            executable_path=launcher,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-dev-shm-usage"],
        )
        yield instance
        instance.close()


def _open(browser: Any, page_file: Path, visit: Visit) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 2000})

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            visit.outside.append(url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("console", lambda msg: visit.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: visit.console_errors.append(str(err)))
    page.goto(page_file.as_uri(), wait_until="load")
    return page


@pytest.mark.live
def test_report_renders_offline_in_headless_chromium(browser: Any, sample_scan: SampleScan) -> None:
    from PIL import Image

    visit = Visit()
    page = _open(browser, sample_scan.out / "report.html", visit)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    plots = page.locator(".js-plotly-plot")
    assert plots.count() >= 4
    # every figure drew traces, not only empty axes
    for i in range(plots.count()):
        assert plots.nth(i).locator(".trace").count() > 0, f"plot {i} has no traces"
    first_plot = Image.open(io.BytesIO(plots.first.screenshot())).convert("RGB")
    colours = first_plot.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 20, "the first plot's screenshot is (nearly) one colour"
    white = sum(n for n, c in colours if min(c) >= 250)
    assert white < 0.97 * first_plot.width * first_plot.height, "the first plot's screenshot is blank"
    whole = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("L")
    assert whole.getextrema()[0] < 100  # text and lines drawn somewhere
    assert page.locator("text=Findings").count() >= 1
    assert visit.outside == [], f"the report tried to reach {visit.outside}"
    assert visit.console_errors == [], visit.console_errors
    page.context.close()


@pytest.mark.live
def test_data_docs_open_offline(browser: Any, sample_scan: SampleScan) -> None:
    docs = sample_scan.out / "quality" / "docs"
    visit = Visit()
    page = _open(browser, docs / "index.html", visit)
    links = page.locator("a[href*='validations/']")
    assert links.count() >= 3
    href = links.first.get_attribute("href")
    page.goto((docs / href).as_uri(), wait_until="load")
    assert page.locator("table").count() > 0
    assert visit.outside == [] and visit.console_errors == [], (visit.outside, visit.console_errors)
    page.context.close()


def test_report_is_self_contained(sample_scan: SampleScan) -> None:
    text = (sample_scan.out / "report.html").read_text()
    assert not REMOTE.search(text)
    assert len(re.findall(r"plotly\.js v\d", text)) == 1  # the library is embedded once
    summary = json.loads((sample_scan.out / "summary.json").read_text())
    assert summary["summary"]["verdict"] in text
    # every finding kind of the scan is listed in the findings table
    for kind in summary["summary"]["findings_by_kind"]:
        assert f"<td>{kind}</td>" in text
    link = re.search(r"href='(quality/docs/index\.html)'", text)
    assert link and (sample_scan.out / link.group(1)).is_file()


def test_the_report_leads_with_the_incidents(sample_scan: SampleScan) -> None:
    """The first section is the incidents, most severe first, each with its paragraph and fix."""
    text = (sample_scan.out / "report.html").read_text()
    incidents = json.loads((sample_scan.out / "summary.json").read_text())["incidents"]
    assert incidents and text.index("<h2>") == text.index("<h2>Incidents</h2>") < text.index("<h2>Findings</h2>")
    at = [text.index(html.escape(i["summary"], quote=True)) for i in incidents]
    assert at == sorted(at)
    for incident in incidents:
        assert html.escape(incident["remediation"], quote=True) in text


def _bare_output(tmp_path: Path, findings: list[dict[str, Any]]) -> Path:
    out = tmp_path / "out"
    out.mkdir(parents=True)
    summary = {"as_of_ms": 0, "input": "<dump>", "partitions": [], "findings": findings,
               "summary": {"verdict": "CRITICAL: 1 hanging transaction", "findings_by_severity": {"critical": 1}}}
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_empty_scan_and_hostile_text(tmp_path: Path) -> None:
    hostile = "<script>alert('x')</script>"
    finding = {"severity": "critical", "kind": "hanging_transaction", "topic": "t<b>", "partition": 0,
               "producer_id": 7, "producer_epoch": 0, "transactional_id": hostile, "first_offset": 3,
               "last_offset": 3, "evidence": f"open since {hostile}", "remediation": "kafka-transactions.sh abort"}
    out = _bare_output(tmp_path, [finding])
    text = write_report(out).read_text()
    assert hostile not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "no transactions" in text and "no partitions" in text
    assert "Data-quality checks were not run." in text
    assert not list(out.glob(".*tmp"))  # written in one step, no leftover


def _synthetic_ptx(rows: int, seed: int = 5) -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    out = []
    for i in range(rows):
        closed = rng.random() < 0.9
        first = None if rng.random() < 0.02 else 1_700_000_000_000 + rng.randrange(10**7)
        out.append({
            "topic": "t", "partition": i % 3, "producer_id": 1000 + i % 17, "transactional_id": f"app-{i % 17}",
            "txn_seq": i, "first_offset": 10 * i, "last_data_offset": 10 * i + 4,
            "marker_offset": 10 * i + 5 if closed else None, "marker_type": rng.choice(["COMMIT", "ABORT"]) if closed
            else None, "marker_timestamp": (first or 1_700_000_000_000) + rng.randrange(5000) if closed else None,
            "first_timestamp": first,
            "prev_marker_timestamp": None if i % 17 == i else (first or 0) - rng.randrange(-3000, 3000),
            "late_batches": 1 if rng.random() < 0.01 else 0, "records": rng.randrange(1, 50),
        })
    return out


def test_report_aggregates_agree_with_the_rows_and_stay_small(tmp_path: Path) -> None:
    """The report reads transactions as Arrow and bins its histograms: same transactions drawn and
    counted as a plain reading of the rows gives, and a page that does not grow with the table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from txn_audit.report import closed_durations_and_records, skew_seconds, timeline_rows
    from txn_audit.schemas import PARTITION_TRANSACTIONS

    rows = _synthetic_ptx(3000)
    table = pa.Table.from_pylist(rows)
    interest = sorted(rows, key=lambda t: (0 if t["marker_offset"] is None or t["late_batches"] > 0 else 1,
                                           -(t["first_timestamp"] or 0), t["partition"], t["producer_id"],
                                           t["txn_seq"]))
    assert timeline_rows(table, 40) == interest[:40]
    skews = [(t["first_timestamp"] - t["prev_marker_timestamp"]) / 1000 for t in rows
             if t["first_timestamp"] is not None and t["prev_marker_timestamp"] is not None]
    assert np.array_equal(skew_seconds(table), np.array(skews))
    closed = [t for t in rows if t["marker_timestamp"] is not None and t["first_timestamp"] is not None]
    seconds, records = closed_durations_and_records(table)
    assert np.array_equal(seconds, [(t["marker_timestamp"] - t["first_timestamp"]) / 1000 for t in closed])
    assert np.array_equal(records, [t["records"] for t in closed])

    sizes = []
    for n in (300, 30_000):
        out = _bare_output(tmp_path / str(n), [])
        (out / "tables" / "partition_transactions").mkdir(parents=True)
        full = [{**{f.name: None for f in PARTITION_TRANSACTIONS}, "batches": 1, "bytes": 100, "source": "log",
                 "state": "open" if r["marker_offset"] is None else "committed", **r} for r in _synthetic_ptx(n)]
        pq.write_table(pa.Table.from_pylist(full, schema=PARTITION_TRANSACTIONS),
                       out / "tables" / "partition_transactions" / "part-0.parquet")
        text = write_report(out).read_text()
        assert f"{n - 60} more transactions are in tables/partition_transactions/" in text
        sizes.append(len(text))
    assert sizes[1] < sizes[0] * 1.05  # 100x the transactions, the same page
