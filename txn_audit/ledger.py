"""The ledger: the one typed, versioned record of a scan, saved beside its tables.

A scan is a run of stages (``txn_audit.stages``); each reads the tables it needs through the
ledger and adds those it writes, and the ledger is saved after each stage, in one step
(``LEDGER_FILE``, a hidden sibling renamed over it). It holds:

* the input: where the dump was and its fingerprint (``fingerprint``: every file's path, size
  and modification time, and the tables' schemas), with the rows and decode issues ingest
  counted; the raw tables are reused by a rerun on the same fingerprint;
* the options the rules ran with, at the audit time (``options``: ``AuditOptions.recorded``);
* every table written, raw, derived or working, as the files and row groups of its Parquet
  files (``manifest.TableManifest``: for the raw tables, each row group's replica, offsets and
  extent, which the passes read), with the stage that wrote it (``Entry``).

Working tables (``WORK``) are what one stage hands to another through files; they are dropped
from the ledger, and from the disk, once the scan is done with them. No pyspark here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from txn_audit.manifest import Manifest, TableManifest, describe_tables, file_from_json, file_json

__all__ = ["Entry", "LEDGER_FILE", "Ledger", "RAW", "TABLE", "VERSION", "WORK"]

#: the ledger's file, beside the tables it describes
LEDGER_FILE = "_ledger.json"
#: bumped whenever the JSON changes meaning: a ledger of another version is not read
VERSION = 1
#: what an entry's table is: written by ingest, or handed from one stage to another (``_work/``)
RAW, TABLE, WORK = "raw", "table", "work"


@dataclass(frozen=True)
class Entry:
    """A table the scan wrote: its files and row groups, the stage that wrote it and its kind."""

    files: TableManifest
    stage: str
    kind: str = TABLE


@dataclass(frozen=True)
class Ledger:
    """The record of a scan whose tables are under ``root`` (a local path or URI; not saved:
    where the ledger was read)."""

    root: str
    #: the dump as given (credentials removed) and its fingerprint
    input: str
    fingerprint: str
    #: per raw table, the rows ingest wrote; per severity, the decode issues
    row_counts: Mapping[str, int] = field(default_factory=dict)
    issue_counts: Mapping[str, int] = field(default_factory=dict)
    #: every table written, by name
    entries: Mapping[str, Entry] = field(default_factory=dict)
    #: the options the rules ran with, at the audit time (None until they ran)
    options: Mapping[str, Any] | None = None

    @property
    def raw(self) -> Manifest:
        """The raw tables' files (what ingest wrote), as the passes and rules read them."""
        return Manifest(self.root, {name: entry.files for name, entry in self.entries.items() if entry.kind == RAW})

    def table(self, name: str) -> TableManifest:
        """Table ``name``'s files (``KeyError``: no stage wrote it)."""
        return self.entries[name].files

    def with_tables(self, stage: str, names: Iterable[str], kind: str = TABLE, folder: str = "") -> Ledger:
        """The ledger with tables ``names``, written by ``stage`` under ``root/folder``, described
        from their files' footers (no row is read)."""
        base = Path(self.root) / folder
        described = describe_tables(base, names).tables
        added = {name: Entry(TableManifest(name, tuple(replace(f, path=f"{folder}/{f.path}".lstrip("/"))
                                                       for f in files.files), self.root), stage, kind)
                 for name, files in described.items()}
        return replace(self, entries={**self.entries, **added})

    def without(self, kind: str) -> Ledger:
        """The ledger without the tables of ``kind`` (all but the raw ones, for a scan again)."""
        return replace(self, entries={name: e for name, e in self.entries.items() if e.kind != kind})

    def dropping(self, names: Iterable[str]) -> Ledger:
        """The ledger without tables ``names`` (working tables, once read)."""
        gone = set(names)
        return replace(self, entries={name: e for name, e in self.entries.items() if name not in gone})

    def ran_with(self, options: Mapping[str, Any]) -> Ledger:
        return replace(self, options=dict(options))

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "input": self.input, "fingerprint": self.fingerprint,
                "row_counts": dict(self.row_counts), "issue_counts": dict(self.issue_counts),
                "options": None if self.options is None else dict(self.options),
                "tables": {name: {"stage": e.stage, "kind": e.kind, "files": [file_json(f) for f in e.files.files]}
                           for name, e in sorted(self.entries.items())}}

    @staticmethod
    def from_json(data: Mapping[str, Any], root: str) -> Ledger:
        if data.get("version") != VERSION:
            raise ValueError(f"ledger version {data.get('version')!r}, expected {VERSION}")
        entries = {name: Entry(TableManifest(name, tuple(file_from_json(f) for f in table["files"]), root),
                               table["stage"], table["kind"])
                   for name, table in data["tables"].items()}
        return Ledger(root, data["input"], data["fingerprint"], data["row_counts"], data["issue_counts"], entries,
                      data["options"])

    def save(self) -> None:
        """Write ``root/LEDGER_FILE`` in one step (a hidden sibling renamed over it)."""
        target = Path(self.root) / LEDGER_FILE
        staging = target.with_name(f".{LEDGER_FILE}.tmp")
        staging.write_text(json.dumps(self.to_json(), sort_keys=True) + "\n")
        os.replace(staging, target)

    @staticmethod
    def load(tables_dir: str | Path) -> Ledger | None:
        """The ledger saved beside the tables in ``tables_dir``; None when there is none or it is
        of another version (then the tables are not reused)."""
        path = Path(tables_dir) / LEDGER_FILE
        try:
            return Ledger.from_json(json.loads(path.read_text()), str(Path(tables_dir).absolute()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
