"""Output folders that change all at once.

A run builds its whole output in a hidden sibling folder and then swaps it with the previous
output in one step, so a reader (or a run killed at any moment) sees either the old output or
the new one, never a mix. On Linux the swap is ``renameat2(RENAME_EXCHANGE)``, atomic in the
kernel; elsewhere it is two renames, and the leftover of a run killed between them is put back
by the next run (``recover``).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from txn_audit.errors import UsageError

MARKER = ".txn-audit-output"  # present in every folder this package wrote
_STAGING = ".staging-"
_OLD = ".previous-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to ``path`` in one step (``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def _siblings(target: Path, kind: str) -> list[Path]:
    prefix = f".{target.name}{kind}"
    try:
        return sorted(p for p in target.parent.iterdir() if p.name.startswith(prefix))
    except FileNotFoundError:
        return []


def recover(target: Path) -> None:
    """Undo what a killed run left: restore a moved-away output, drop half-built ones."""
    previous = _siblings(target, _OLD)
    if previous and not target.exists():
        os.rename(previous[-1], target)
        previous = previous[:-1]
    for leftover in [*previous, *_siblings(target, _STAGING)]:
        shutil.rmtree(leftover, ignore_errors=True)


def check_target(target: Path) -> None:
    """Refuse to replace a folder this package did not write (``--out .`` must not eat a repo)."""
    if target.is_file():
        raise UsageError(f"--out must be a folder, {target} is a file")
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).exists():
        raise UsageError(
            f"--out {target} already holds files that txn-audit did not write; choose a new or empty folder"
        )


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically; False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def publish(staging: Path, target: Path) -> None:
    """Make ``staging`` the new ``target`` in one step and remove the previous output."""
    if not target.exists():
        os.rename(staging, target)
        return
    if _exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)  # now holds the previous output
        return
    old = target.with_name(f".{target.name}{_OLD}{uuid.uuid4().hex}")
    os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def link_tree(source: Path, dest: Path) -> None:
    """Copy a folder of immutable files by hard links (a plain copy where links are refused)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link)


@contextmanager
def staged_output(target: Path) -> Iterator[Path]:
    """Yield a fresh hidden folder next to ``target``; on success it replaces ``target`` at once,
    on any failure it is removed and ``target`` stays as it was."""
    target = target.absolute()
    recover(target)
    check_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}{_STAGING}{uuid.uuid4().hex}")
    staging.mkdir()
    (staging / MARKER).write_text("written by txn-audit; the whole folder is replaced by the next run\n")
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish(staging, target)
