"""The HTML report: self-contained, offline, and it renders in a real headless browser."""

from __future__ import annotations

import io
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser import Visit, open_page
from tests.conftest import SampleScan
from txn_audit.report import write_report

REMOTE = re.compile(r"""<script[^>]*\bsrc\s*=\s*["']?(?:https?:)?//|<link[^>]*\bhref\s*=\s*["']?(?:https?:)?//""",
                    re.IGNORECASE)


@pytest.mark.live
def test_report_renders_offline_in_headless_chromium(browser: Any, sample_scan: SampleScan) -> None:
    from PIL import Image

    visit = Visit()
    page = open_page(browser, sample_scan.out / "report.html", visit)
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


def _ink(png: bytes) -> tuple[float, tuple[int, int, int]]:
    """The share of a screenshot's pixels that are not background (near white), and their mean colour."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int64).reshape(-1, 3)
    inked = pixels[pixels.min(axis=1) < 235]
    if not len(inked):
        return 0.0, (255, 255, 255)
    mean = inked.mean(axis=0).astype(int)
    return len(inked) / len(pixels), (int(mean[0]), int(mean[1]), int(mean[2]))


def _icons_drawn(page: Any, selector: str, expected: int) -> list[tuple[str, tuple[int, int, int]]]:
    """Each visible status icon of ``selector``: drawn in Font Awesome, some of its box inked;
    its class and mean colour, for the caller to check. The table's script draws its rows more
    than once (an icon measured may be replaced while it is): the icons are measured again, a
    few times, until one whole pass sees every one drawn; the last pass's failure is raised."""
    # fonts load when first used
    page.wait_for_function("""sel => document.fonts.status === 'loaded' && [...document.querySelectorAll(sel)]
        .every(el => getComputedStyle(el, '::before').fontFamily.includes('Font Awesome'))""", arg=selector,
                           timeout=30_000)
    # and until the last drawing shows as many as expected (a loaded machine draws late)
    page.wait_for_function("""([sel, n]) => [...document.querySelectorAll(sel)]
        .filter(el => el.getClientRects().length > 0).length === n""", arg=[selector, expected], timeout=30_000)
    for attempt in range(5):
        try:
            return _measure_icons(page, selector, expected)
        except AssertionError:
            if attempt == 4:
                raise
            page.wait_for_timeout(1_000)
    raise AssertionError("unreachable")


def _measure_icons(page: Any, selector: str, expected: int) -> list[tuple[str, tuple[int, int, int]]]:
    icons = page.locator(selector)
    seen = []
    for i in range(icons.count()):
        icon = icons.nth(i)
        if not icon.is_visible():
            continue
        box = icon.bounding_box()
        assert box and box["width"] >= 8 and box["height"] >= 8, f"icon {i} has no size: {box}"
        family = icon.evaluate("el => getComputedStyle(el, '::before').fontFamily")
        assert "Font Awesome" in family, (i, family, icon.get_attribute("class"))
        share, colour = _ink(page.screenshot(clip=box))
        assert share > 0.15, f"icon {i} ({icon.get_attribute('class')}) is blank: {share:.0%} inked"
        seen.append((str(icon.get_attribute("class")), colour))
    assert len(seen) == expected, seen
    return seen


@pytest.mark.live
def test_data_docs_draw_their_tables_and_status_icons_offline(browser: Any, sample_scan: SampleScan) -> None:
    """The index lists every validation run in Bootstrap Table (one page of ten rows), each with
    its status icon drawn in Font Awesome, green for a suite that passed; one "Clear Filters"
    shows; no newsletter; a validation page draws its status icons too."""
    docs = sample_scan.out / "quality" / "docs"
    runs = sorted(docs.glob("validations/*/**/*.html"))
    results = json.loads((sample_scan.out / "quality" / "results.json").read_text())["results"]
    passed = {t for t in {r["table"] for r in results} if all(r["success"] for r in results if r["table"] == t)}
    visit = Visit()
    page = open_page(browser, docs / "index.html", visit)
    table = page.locator("table.ge-index-page-validation-results-table")
    table.locator("tbody tr").first.wait_for(timeout=30_000)
    shown = table.locator("tbody tr")
    assert shown.count() == min(10, len(runs))
    assert page.get_by_text(re.compile(rf"of {len(runs)} rows")).filter(visible=True).count() == 1
    icons = _icons_drawn(page, "table.ge-index-page-validation-results-table i.fas", min(10, len(runs)))
    for row, (css, colour) in enumerate(icons):
        asset = shown.nth(row).locator("td").nth(3).inner_text().strip()
        ok = asset in passed
        assert ("fa-check-circle" in css) == ok, (asset, css)
        green, red = colour[1] > colour[0] + 40, colour[0] > colour[1] + 40
        assert green if ok else red, (asset, colour)
    clear = page.get_by_text("Clear Filters")
    assert sum(clear.nth(i).is_visible() for i in range(clear.count())) == 1
    assert "newsletter" not in page.content().lower()
    failed = next((p for p in runs if p.relative_to(docs).parts[1] not in passed), runs[0])
    page.goto(failed.as_uri(), wait_until="load")
    page.locator("td i.fas").first.wait_for(timeout=30_000)
    checks = [r for r in results if r["table"] == failed.relative_to(docs).parts[1]]
    drawn = _icons_drawn(page, "td i.fas.fa-check-circle, td i.fas.fa-times", len(checks))
    assert sum("fa-times" in css for css, _ in drawn) == sum(not r["success"] for r in checks)
    assert visit.outside == [] and visit.console_errors == [], (visit.outside, visit.console_errors)
    page.context.close()


def _plots(page: Any) -> list[dict[str, Any]]:
    """What plotly drew: each figure's traces (type, name, points) and axis types, read from
    the page's plot elements."""
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    result: list[dict[str, Any]] = page.evaluate(r"""() =>
      [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
        title: (gd.layout.title || {}).text || '',
        traces: gd.data.map(t => ({type: t.type, name: t.name || '', x: Array.from(t.x || []),
                                   y: Array.from(t.y || [])})),
        axes: Object.fromEntries(Object.keys(gd._fullLayout).filter(k => /^[xy]axis\d*$/.test(k))
                                 .map(k => [k, gd._fullLayout[k].type])),
    }))""")
    return result


@pytest.mark.live
def test_the_report_draws_held_records_every_open_transaction_and_incident(browser: Any,
                                                                          sample_scan: SampleScan) -> None:
    """Against the scan's own tables: the held-records chart has a bar per data partition that
    holds records (none for internal topics), each wide enough to see; the timeline has a bar per
    open transaction (``partition_stability.open_transactions``) and a diamond per incident; the
    durations are on a log axis; severities read critical, warning, info."""
    import pyarrow.dataset as ds

    stability = ds.dataset(str(sample_scan.out / "tables" / "partition_stability")).to_table().to_pylist()
    holding = {f"{p['topic']}-{p['partition']}" for p in stability
               if p["held_records"] > 0 and not p["topic"].startswith("__")}
    summary = json.loads((sample_scan.out / "summary.json").read_text())
    visit = Visit()
    page = open_page(browser, sample_scan.out / "report.html", visit)
    plots = {p["title"].split(" (")[0]: p for p in _plots(page)}
    held = plots["Records held back per data partition"]
    assert holding and [set(t["y"]) for t in held["traces"]] == [holding, holding]
    assert held["axes"]["xaxis"] == held["axes"]["xaxis2"] == "log"
    bars = page.locator(".js-plotly-plot").first.locator(".trace.bars").first.locator(".point path")
    assert bars.count() == len(holding)
    for i in range(bars.count()):
        box = bars.nth(i).bounding_box()
        assert box and box["width"] >= 10, f"bar {i} is {box} wide"
    timeline = plots["Open, hanging and long transactions, and the incidents"]
    by_name = {t["name"]: t for t in timeline["traces"]}
    open_bars = sum(len(by_name[s]["x"]) for s in ("hanging", "open") if s in by_name)
    assert open_bars == sum(p["open_transactions"] for p in stability)
    diamonds = sum(len(t["x"]) for t in timeline["traces"] if t["name"].endswith(" incident"))
    assert diamonds == len(summary["incidents"]) > 0
    durations = plots["Transaction duration and size"]
    assert durations["axes"]["xaxis"] == "log"
    header = page.locator("p").filter(has_text="audit time").first.inner_text()
    assert header.index("critical") < header.index("warning") < header.index("info"), header
    shot = page.locator(".js-plotly-plot").nth(1).screenshot()
    assert _ink(shot)[0] > 0.02, "the timeline's screenshot is blank"
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
    assert "no open, hanging or long transaction and no incident" in text
    assert "No data partition holds records back." in text
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
    """The report reads transactions as Arrow and bins its histograms: the same transactions drawn
    and counted as a plain reading of the rows gives, and a page that grows with the open, late and
    long transactions it draws, not with the others."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from txn_audit.report import closed_durations_and_records, skew_seconds, timeline_rows
    from txn_audit.schemas import PARTITION_TRANSACTIONS, declared, in_ms

    rows = _synthetic_ptx(3000)
    table = pa.Table.from_pylist(rows)
    as_of, timeout = 1_700_000_000_000 + 10**7, 2_000

    def state(t: dict[str, Any]) -> str | None:
        if t["marker_offset"] is None:
            return "hanging" if as_of - (t["first_timestamp"] or as_of) > timeout else "open"
        if t["late_batches"] > 0:
            return "late records"
        return "long" if t["marker_timestamp"] - (t["first_timestamp"] or as_of) > timeout else None

    ranks = ["hanging", "open", "late records", "long"]
    expected = sorted(({**t, "timeline_state": state(t)} for t in rows if state(t)),
                      key=lambda t: (ranks.index(t["timeline_state"]), -(t["first_timestamp"] or 0), t["partition"],
                                     t["producer_id"], t["txn_seq"]))
    assert {t["timeline_state"] for t in expected} == set(ranks)
    assert timeline_rows(table, as_of, timeout) == (expected, 0)
    assert timeline_rows(table, as_of, timeout, max_rows=40) == (expected[:40], len(expected) - 40)
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
        # the same 30 open transactions, and n - 30 ordinary ones
        ordinary = [{**r, "marker_offset": r["first_offset"] + 5, "marker_type": "COMMIT", "late_batches": 0,
                     "marker_timestamp": (r["first_timestamp"] or 0) + 10} for r in _synthetic_ptx(n - 30, seed=6)]
        opened = [{**r, "marker_offset": None, "marker_type": None, "marker_timestamp": None, "txn_seq": 10**6 + i}
                  for i, r in enumerate(_synthetic_ptx(30, seed=7))]
        full = [{**{f.name: None for f in PARTITION_TRANSACTIONS}, "batches": 1, "bytes": 100, "source": "log",
                 "state": "open" if r["marker_offset"] is None else "committed", **r} for r in ordinary + opened]
        written = declared(pa.Table.from_pylist(full, schema=in_ms(PARTITION_TRANSACTIONS)), PARTITION_TRANSACTIONS)
        pq.write_table(written,
                       out / "tables" / "partition_transactions" / "part-0.parquet")
        text = write_report(out).read_text()
        assert f"the {n - 30:,} other transactions are in tables/partition_transactions/" in text
        sizes.append(len(text))
    assert sizes[1] < sizes[0] * 1.05  # 100x the transactions, the same page


def test_blocked_consumer_groups_are_a_table_after_the_incidents(tmp_path: Path) -> None:
    """``summary.json``'s ``blocked_consumers`` are listed one row each, escaped, after the
    incidents; a scan with none has no such section."""
    from txn_audit.report import blocked_consumers_section

    assert blocked_consumers_section([]) == ""
    row = {"group_id": "<g>", "topic": "t", "partition": 0, "committed_offset": 16, "last_stable_offset": 16,
           "high_watermark": 28, "records_behind": 12, "time_behind_ms": 150_000,
           "time_behind_from": "held_transaction", "culprit_transactional_id": None, "culprit_producer_id": 7}
    section = blocked_consumers_section([row, row | {"group_id": "h", "committed_offset": 4, "records_behind": 24}])
    cells = re.findall(r"<td>(.*?)</td>", section)
    assert cells[:8] == ["&lt;g&gt;", "t-0", "16", "16", "28", "12", "2.5 min (since the holding transaction&#x27;s "
                         "first record)", "producer 7"]
    assert "2 consumer group(s)" in section
    out = _bare_output(tmp_path, [])
    doc = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps(doc | {"blocked_consumers": [row]}))
    text = write_report(out).read_text()
    assert text.index("<h2>Incidents</h2>") < text.index("<h2>Blocked consumer groups</h2>") < \
        text.index("<h2>Findings</h2>")
