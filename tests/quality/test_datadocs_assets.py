"""The Data Docs' bundled assets against Great Expectations' own page templates: every file a
template loads from a CDN is bundled at the pinned version, or dropped (Vega, the vendor's logo)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from txn_audit.quality import assets

REPO = Path(__file__).resolve().parents[2]
PINS = json.loads((REPO / "tools" / "datadocs" / "package.json").read_text())["dependencies"]
# what each bundled package's licence allows: redistribution with its notice
LICENCES = {"MIT", "Apache-2.0", "(CC-BY-4.0 AND OFL-1.1 AND MIT)"}
REMOTE_TAG = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=[\"'](?:https?:)?//[^\"']*[\"'][^>]*>",
                        re.IGNORECASE)
ADDRESS = re.compile(r"\b(?:src|href)=[\"']([^\"']*)[\"']", re.IGNORECASE)


def _templates() -> dict[str, str]:
    import great_expectations

    folder = Path(great_expectations.__file__).parent / "render" / "view" / "templates"
    return {path.name: path.read_text() for path in sorted(folder.glob("*.j2"))}


@pytest.fixture(scope="module")
def installed() -> Path:
    if assets.missing():
        pytest.fail(f"the Data Docs assets are not installed: run scripts/ensure-docs-assets.sh "
                    f"(missing {assets.missing()[:3]}...)")
    return assets.VENDOR_DIR


def test_bundled_packages_are_the_pinned_releases_and_may_be_bundled(installed: Path) -> None:
    assert set(assets.PACKAGES) == set(PINS)
    for package in assets.PACKAGES:
        meta = json.loads((installed / package / "package.json").read_text())
        assert meta["version"] == PINS[package], package
        assert meta["license"] in LICENCES, (package, meta["license"])


def test_every_remote_file_of_the_templates_is_bundled_or_dropped(installed: Path, tmp_path: Path) -> None:
    """Each template's tags, put in a page three folders down (as a validation page is): the
    styles and scripts point at bundled files that exist, only Vega and images are dropped."""
    page = tmp_path / "validations" / "t" / "run" / "page.html"
    vendor = tmp_path / "static" / "vendor"
    page.parent.mkdir(parents=True)
    assets.bundle(tmp_path / "static")
    matched: set[str] = set()
    dropped: list[str] = []
    tags = [tag for text in _templates().values() for tag in REMOTE_TAG.findall(text) if "{{" not in tag]
    assert len(tags) >= 12  # the templates still load their assets from CDNs
    for tag in tags:
        local = assets.localise(tag, page, vendor)
        assert not REMOTE_TAG.search(local), tag
        if not local:
            dropped.append(ADDRESS.search(tag).group(1))  # type: ignore[union-attr]
            continue
        target = (page.parent / ADDRESS.search(local).group(1)).resolve()  # type: ignore[union-attr]
        assert target.is_file() and target.is_relative_to(vendor.resolve()), (tag, target)
        assert "integrity=" not in local and "crossorigin=" not in local
        matched.add(target.relative_to(vendor.resolve()).as_posix())
    assert matched == {a.target for a in assets.ASSETS}  # every asset is one a template loads
    assert dropped and all(re.search(r"/vega(-lite|-embed)?@\d+$", address) for address in dropped), dropped


def test_font_awesome_finds_its_fonts(installed: Path) -> None:
    css = (installed / "@fortawesome/fontawesome-free/css/all.min.css").read_text()
    fonts = set(re.findall(r"url\(([^)]+)\)", css))
    assert fonts
    for font in fonts:
        assert (installed / "@fortawesome/fontawesome-free/css" / font).resolve().is_file(), font


def test_the_newsletter_footer_and_remote_links_go() -> None:
    footer = _templates()["cloud-footer.j2"]
    assert "newsletter" in footer
    html = f"<body><p><a href='https://example.org/x'>GX</a></p>{footer}<footer>ours</footer></body>"
    out = assets.localise(html, Path("index.html"), Path("static/vendor"))
    assert "newsletter" not in out and "<footer>ours</footer>" in out and "example.org" not in out


def test_without_the_assets_every_script_and_remote_tag_goes(tmp_path: Path) -> None:
    """Pages written where the assets are not installed still never call out."""
    html = "".join(_templates()[name] for name in ("js_script_imports.j2", "page.j2"))
    out = assets.localise(html, tmp_path / "index.html", None)
    assert not REMOTE_TAG.search(out) and "<script" not in out
    assert assets.bundle(tmp_path / "static", vendor_dir=tmp_path / "absent") is None
