"""Output folders that change all at once.

A run builds its whole output in a hidden sibling folder and then swaps it with the previous
output in one step, so a reader (or a run killed at any moment) sees either the old output or
the new one, never a mix. On Linux the swap is ``renameat2(RENAME_EXCHANGE)``, atomic in the
kernel; elsewhere it is two renames, and the leftover of a run killed between them is put back
by the next run (``recover``).

One run at a time writes an output: a run holds a lock on ``.<name>.lock`` beside the output
(``flock``, released by the kernel when the process ends however it ends) from before it
cleans a killed run's leftovers until its output is published, and a second run started
meanwhile stops at once with ``OutputInUseError`` naming the run that holds it. A write that
fails for a reason of the output's storage (a full disk, a permission denied, the folder
removed by someone else) ends the run with ``OutputError``, one line naming the path; the
staging folder is removed and the previous output is left whole.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from txn_audit.errors import OutputError, OutputInUseError, TxnAuditError, UsageError

__all__ = [
    "FIXES_SCRIPT", "MARKER", "check_target", "link_tree", "output_lock", "publish", "recover", "staged_output",
    "write_failure", "write_json_atomic", "write_text_atomic",
]

MARKER = ".txn-audit-output"  # present in every folder this package wrote
#: the script ``scan --out DIR`` writes beside ``summary.json``: every fix, for an operator to review, then
#: run (``txn_audit.fixes``)
FIXES_SCRIPT = "fixes.sh"
_STAGING = ".staging-"
_OLD = ".previous-"
_LOCK = ".lock"
#: the errors of a write that the output's storage refused, whatever the run was writing
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS)
#: how the same errors read once Spark has carried them from a task or the JVM as text (the
#: strerror of each, and the name of Java's exception for a permission denied)
_STORAGE_TEXTS = {os.strerror(code): code for code in _STORAGE_ERRNOS} | {"AccessDeniedException": errno.EACCES}
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
    """Refuse to replace a folder this package did not write (``--out .`` must not eat a repo);
    a folder that cannot be looked at is ``OutputError``."""
    try:
        if target.is_file():
            raise UsageError(f"--out must be a folder, {target} is a file")
        if target.is_dir() and any(target.iterdir()) and not (target / MARKER).exists():
            raise UsageError(
                f"--out {target} already holds files that txn-audit did not write; choose a new or empty folder"
            )
    except OSError as err:
        raise OutputError(f"cannot write the output {target}: {os.strerror(err.errno or 0).lower()}"
                          + (f" ({os.fsdecode(err.filename)})" if err.filename else "")) from err


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


def _lock_file(target: Path) -> Path:
    return target.with_name(f".{target.name}{_LOCK}")


@contextmanager
def output_lock(target: Path) -> Iterator[None]:
    """Hold the lock of the output ``target`` (``.<name>.lock`` beside it, which the holder
    removes when done), or raise ``OutputInUseError`` at once, naming the run that holds it.
    ``target``'s folder must exist."""
    path = _lock_file(target)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 512).decode("utf-8", "replace").strip() or "a run that has just started"
            os.close(fd)
            raise OutputInUseError(f"{target} is being written by another run ({holder}); nothing was changed: "
                                   "run again when it has ended") from None
        try:  # the file may have been removed by the holder between our open and our lock
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, started "
                     f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode())
        yield
    finally:
        try:
            os.unlink(path)  # while held: a run that opened it before retries on the next file
        except OSError:
            pass
        os.close(fd)


def _identity(folder: Path) -> tuple[int, int]:
    info = os.stat(folder)
    return info.st_dev, info.st_ino


def _moved(staging: Path, identity: tuple[int, int]) -> bool:
    """Whether ``staging`` is no longer the folder this run made: removed, perhaps made again
    by a writer that creates the folders it writes into (its marker then missing)."""
    try:
        return _identity(staging) != identity
    except OSError:
        return True


def _failure_text(err: BaseException) -> str:
    """The error and the ones it was raised from, as text (a Spark task's error arrives so)."""
    seen: list[str] = []
    current: BaseException | None = err
    while current is not None and len(seen) < 10:
        seen.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


def _os_error(err: BaseException) -> OSError | None:
    current: BaseException | None = err
    for _ in range(10):
        if current is None:
            return None
        if isinstance(current, OSError) and current.errno is not None:
            return current
        current = current.__cause__ or current.__context__
    return None


def _kept(target: Path) -> str:
    return "the previous output is left as it was" if (target / MARKER).is_file() else "nothing was published there"


def write_failure(err: BaseException, target: Path, staging: Path | None = None,
                  vanished: bool = False) -> OutputError | None:
    """``err`` as the ``OutputError`` of a write to the output ``target`` (built in ``staging``)
    that its storage refused: no space, a quota, a permission, a read-only file system, or the
    folder gone (``vanished``, or a missing file while the folder it was in is gone); None for
    any other failure. The message is one line that names the path and says what was kept."""
    if isinstance(err, TxnAuditError) or not isinstance(err, Exception):
        return None
    kept = _kept(target)
    if vanished:
        where = staging if staging is not None and target.parent.is_dir() else target.parent
        return OutputError(f"cannot write the output {target}: the folder {where} was removed while it was "
                           f"written; {kept}")
    found = _os_error(err)
    code = found.errno if found is not None and found.errno in _STORAGE_ERRNOS else None
    text = _failure_text(err)
    if code is None:
        code = next((c for sign, c in _STORAGE_TEXTS.items() if sign in text), None)
    if code is None:
        return None
    path = found.filename if found is not None and found.errno == code and found.filename else None
    at = f" (writing {os.fsdecode(path)})" if path is not None else ""
    return OutputError(f"cannot write the output {target}: {os.strerror(code).lower()}{at}; {kept}")


@contextmanager
def _refused(target: Path) -> Iterator[None]:
    """An ``OSError`` of the output's storage as ``OutputError`` (``write_failure``)."""
    try:
        yield
    except OSError as err:
        failure = write_failure(err, target)
        if failure is None:
            raise
        raise failure from err


@contextmanager
def staged_output(target: Path) -> Iterator[Path]:
    """Yield a fresh hidden folder next to ``target``, holding ``target``'s lock
    (``output_lock``: ``OutputInUseError`` while another run writes it); on success the folder
    replaces ``target`` at once, on any failure it is removed and ``target`` stays as it was. A
    failure of the storage (``write_failure``: a full disk, a permission denied, the folder
    removed meanwhile) is raised as ``OutputError``, from the error it was."""
    target = target.absolute()
    check_target(target)
    with ExitStack() as held:
        with _refused(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(output_lock(target))
            recover(target)  # under the lock: what is left beside target is a killed run's
            check_target(target)
            staging = target.with_name(f".{target.name}{_STAGING}{uuid.uuid4().hex}")
            staging.mkdir()
        identity = _identity(staging)
        try:
            (staging / MARKER).write_text("written by txn-audit; the whole folder is replaced by the next run\n")
            yield staging
            if _moved(staging, identity) or not (staging / MARKER).is_file():
                raise OutputError(f"cannot write the output {target}: the folder {staging} was removed while it "
                                  "was written; " + _kept(target))
            publish(staging, target)
        except BaseException as err:
            failure = write_failure(err, target, staging, vanished=_moved(staging, identity))
            shutil.rmtree(staging, ignore_errors=True)
            if failure is not None:
                raise failure from err
            raise
