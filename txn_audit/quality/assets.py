"""The styles, fonts and scripts of the Data Docs, bundled beside the pages so they render offline.

Great Expectations' page templates load Bootstrap, Bootstrap Table (and its filter control),
bootstrap-datepicker, bootstrap-dark, Font Awesome, jQuery and Popper from CDNs. Each is an npm
package pinned in ``tools/datadocs/package.json`` (exact versions; ``package-lock.json`` holds
their integrity hashes); ``scripts/ensure-docs-assets.sh`` installs them with ``npm ci`` and
copies the files listed in ``ASSETS`` (and each package's licence) into ``VENDOR_DIR``, which a
scan copies into ``docs/static/vendor/`` (``bundle``). The pages' CDN tags are then pointed at
those copies (``localise``): nothing is fetched from a network when the pages are opened.

The rules:

- a tag whose address matches an asset's ``pattern`` is pointed at the bundled file, relative
  to its page, its ``integrity`` and ``crossorigin`` attributes dropped (the bundled Popper is
  1.16.1, the release Bootstrap 4.3.1 asks for, where the templates name 1.12.9);
- any other tag that loads a remote file is dropped: only Vega's, for charts that the suites'
  pages never draw (``uses_vega``; a test checks every page of a scan), and the vendor's logo;
- a link to a remote page becomes ``#``; the vendor's newsletter footer is removed.

Licences, checked for bundling: Bootstrap, Bootstrap Table, bootstrap-dark, jQuery and Popper
are MIT; bootstrap-datepicker Apache-2.0; Font Awesome Free is CC BY 4.0 (icons), SIL OFL 1.1
(fonts) and MIT (code). Each package's licence file is copied beside its files.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSETS", "Asset", "PACKAGES", "VENDOR_DIR", "bundle", "install", "localise", "missing", "uses_vega"]

#: where ``scripts/ensure-docs-assets.sh`` puts the bundled files (not in the repository)
VENDOR_DIR = Path(__file__).with_name("vendor")


@dataclass(frozen=True)
class Asset:
    """One file a page loads: its npm package, its path in the package, and a pattern that
    matches the address the templates give it (its path, whatever the host)."""

    package: str
    path: str
    pattern: str

    @property
    def target(self) -> str:
        """Its path under the vendor folder."""
        return f"{self.package}/{self.path}"


ASSETS: tuple[Asset, ...] = (
    Asset("bootstrap", "dist/css/bootstrap.min.css", r"/bootstrap/4\.3\.1/css/bootstrap\.min\.css$"),
    Asset("bootstrap", "dist/js/bootstrap.min.js", r"/bootstrap/4\.3\.1/js/bootstrap\.min\.js$"),
    Asset("bootstrap-table", "dist/bootstrap-table.min.css",
          r"/bootstrap-table@[\d.]+/dist/bootstrap-table\.min\.css$"),
    Asset("bootstrap-table", "dist/bootstrap-table.min.js", r"/bootstrap-table@[\d.]+/dist/bootstrap-table\.min\.js$"),
    Asset("bootstrap-table", "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
          r"/bootstrap-table@[\d.]+/dist/extensions/filter-control/bootstrap-table-filter-control(\.min)?\.css$"),
    Asset("bootstrap-table", "dist/extensions/filter-control/bootstrap-table-filter-control.min.js",
          r"/bootstrap-table@[\d.]+/dist/extensions/filter-control/bootstrap-table-filter-control\.min\.js$"),
    Asset("bootstrap-datepicker", "dist/css/bootstrap-datepicker.min.css",
          r"/bootstrap-datepicker/1\.9\.0/css/bootstrap-datepicker\.min\.css$"),
    Asset("bootstrap-datepicker", "dist/js/bootstrap-datepicker.min.js",
          r"/bootstrap-datepicker/1\.9\.0/js/bootstrap-datepicker\.min\.js$"),
    Asset("@forevolve/bootstrap-dark", "dist/css/bootstrap-prefers-dark.min.css",
          r"/@forevolve/bootstrap-dark@1\.1\.0/dist/css/bootstrap-prefers-dark\.css$"),
    Asset("@fortawesome/fontawesome-free", "css/all.min.css", r"/font-awesome/6\.6\.0/css/all\.min\.css$"),
    Asset("jquery", "dist/jquery.min.js", r"/jquery-3\.7\.1\.min\.js$"),
    Asset("popper.js", "dist/umd/popper.min.js", r"/popper\.js/1\.[\d.]+/umd/popper\.min\.js$"),
)

#: the packages bundled, each with its npm ``package.json`` (name, version, licence) copied too
PACKAGES: tuple[str, ...] = tuple(dict.fromkeys(a.package for a in ASSETS))

#: files the styles load by relative address (Font Awesome's fonts, beside its ``css/``), and
#: the licence files (Popper's is the header of its script)
EXTRA_FILES: tuple[str, ...] = (
    *(f"@fortawesome/fontawesome-free/webfonts/{name}.{ext}"
      for name in ("fa-brands-400", "fa-regular-400", "fa-solid-900", "fa-v4compatibility")
      for ext in ("woff2", "ttf")),
    "@fortawesome/fontawesome-free/LICENSE.txt", "bootstrap/LICENSE", "bootstrap-table/LICENSE",
    "bootstrap-datepicker/LICENSE", "@forevolve/bootstrap-dark/LICENSE", "jquery/LICENSE.txt",
    *(f"{package}/package.json" for package in PACKAGES),
)

_TAG = re.compile(r"<(script|link|img)\b[^>]*?\b(?:src|href)=([\"'])(https?:)?//([^\"']*)\2[^>]*>(\s*</script>)?",
                  re.IGNORECASE)
_SRI = re.compile(r"\s+(?:integrity|crossorigin)=([\"'])[^\"']*\1", re.IGNORECASE)
_REMOTE_HREF = re.compile(r"href=([\"'])(?:https?:)?//[^\"']*\1", re.IGNORECASE)
_NEWSLETTER = re.compile(r"<footer>(?:(?!</footer>).)*?newsletter(?:(?!</footer>).)*?</footer>",
                         re.IGNORECASE | re.DOTALL)
_VEGA = re.compile(r"\bvegaEmbed\s*\(")


def _files() -> list[str]:
    return [*dict.fromkeys(a.target for a in ASSETS), *EXTRA_FILES]


def missing(vendor_dir: Path = VENDOR_DIR) -> list[str]:
    """The bundled files absent from ``vendor_dir`` (none once the assets are installed)."""
    return [name for name in _files() if not (vendor_dir / name).is_file()]


def install(node_modules: Path, vendor_dir: Path = VENDOR_DIR) -> None:
    """Copy the files of ``ASSETS`` and ``EXTRA_FILES`` from an ``npm ci`` of
    ``tools/datadocs`` into ``vendor_dir``, replacing it whole (built beside it, then renamed)."""
    absent = [name for name in _files() if not (node_modules / name).is_file()]
    if absent:
        raise FileNotFoundError(f"{node_modules} lacks {', '.join(absent)}")
    staging = vendor_dir.with_name(vendor_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for name in _files():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(node_modules / name, staging / name)
    old = vendor_dir.with_name(vendor_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if vendor_dir.exists():
        vendor_dir.rename(old)
    staging.rename(vendor_dir)
    shutil.rmtree(old, ignore_errors=True)


def bundle(static_dir: Path, vendor_dir: Path = VENDOR_DIR) -> Path | None:
    """Copy the installed assets into ``static_dir/vendor``; None, copying nothing, when they are
    not installed (``missing``)."""
    if missing(vendor_dir):
        return None
    target = static_dir / "vendor"
    shutil.copytree(vendor_dir, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".installed"))
    return target


def uses_vega(html: str) -> bool:
    """Whether a page draws a Vega chart (the suites' pages draw none)."""
    return bool(_VEGA.search(html))


def localise(html: str, page: Path, vendor: Path | None) -> str:
    """``html`` (of the file ``page``) with its remote styles and scripts pointed at the bundled
    copies under ``vendor`` (or dropped, with every script, when ``vendor`` is None: a page
    without its styles still reads, and never calls out), remote links made ``#``, and the
    newsletter footer removed."""
    assets = [(re.compile(a.pattern), a.target) for a in ASSETS]

    def replace(match: re.Match[str]) -> str:
        tag, address = match.group(0), match.group(4)
        path = address.split("?", 1)[0]
        local = next((target for pattern, target in assets if pattern.search(path)), None)
        if vendor is None or local is None:
            return ""
        relative = Path(os.path.relpath(vendor / local, page.parent)).as_posix()
        return _SRI.sub("", tag.replace(match.group(2) + (match.group(3) or "") + "//" + address + match.group(2),
                                        match.group(2) + relative + match.group(2), 1))

    html = _TAG.sub(replace, html)
    if vendor is None:
        html = re.sub(r"<script\b[^>]*>.*?</script>", "", html, flags=re.IGNORECASE | re.DOTALL)
    html = _REMOTE_HREF.sub('href="#"', html)
    return _NEWSLETTER.sub("", html)


def main(argv: list[str]) -> int:
    """``python -m txn_audit.quality.assets NODE_MODULES``: install the bundled files."""
    if len(argv) != 1:
        print("usage: python -m txn_audit.quality.assets NODE_MODULES", file=sys.stderr)
        return 2
    try:
        install(Path(argv[0]))
    except OSError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"Data Docs assets installed in {VENDOR_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
