"""Where a dump lives: a local folder, ``file://``, ``s3://``, ``webhdfs://`` or ``hdfs://``, read through
``pyarrow.fs``.

``resolve_dump`` turns the dump argument into a ``DumpLocation`` (a pyarrow ``FileSystem`` and the
root path in it); ``DumpLocation.listing`` lists the whole tree once, and discovery works on that
listing whatever the storage. Workers open the files that discovery hands them with
``open_buffer`` / ``open_stream``, given the ``FileTask.path`` string: a local path (memory-mapped,
as before) or a URI of the same storage.

S3 settings come from pyarrow's (the AWS SDK's) usual sources: ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, ``AWS_REGION``,
and ``AWS_ENDPOINT_URL`` for an S3-compatible server; URI query parameters such as
``?endpoint_override=host:port&scheme=http`` or ``?region=...`` also work and travel with every
file's URI to the executors. Credentials are never put into the URIs txn-audit builds, and a
``user:secret@`` part of the dump URI is removed from everything it prints or writes.

HDFS is reached two ways. ``webhdfs://namenode:<http port>/path`` speaks Hadoop's WebHDFS REST API,
served by the NameNode's HTTP port (9870 by default) with the data streamed from the DataNodes'
HTTP ports, so it needs nothing on this machine but Python: fsspec's ``WebHDFS`` client wrapped as a
``pyarrow.fs.PyFileSystem`` (``webhdfs_filesystem``). The Hadoop user is ``?user=NAME`` in the URI,
else ``HADOOP_USER_NAME``, else the login name, as Hadoop's own client picks it (simple
authentication; a Kerberized cluster needs a delegation token, not handled here). ``webhdfs://`` is
also a scheme Hadoop's client in Spark reads, so a warehouse written there is readable by Spark as
it is. ``hdfs://namenode:<rpc port>/path`` uses pyarrow's ``HadoopFileSystem``, which needs Hadoop's
native ``libhdfs`` and a JVM on every host (``HADOOP_HOME`` or ``ARROW_LIBHDFS_DIR``): it is taken
when they are set, and refused with a ``UsageError`` that points at ``webhdfs://`` when they are not.
The DataNodes' addresses the NameNode hands out must be reachable from where the dump is read.

Local paths keep their special handling: symbolic links are listed (by ``lstat``), never followed,
and the listing stops at them; pyarrow's ``LocalFileSystem`` would follow them.
"""

from __future__ import annotations

import errno
import getpass
import io
import mmap
import os
import posixpath
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

import pyarrow.fs as pafs

from txn_audit.errors import UsageError
from txn_audit.usage import local_path

#: Schemes a dump may be read from, besides a plain local path.
REMOTE_SCHEMES = ("s3", "hdfs", "webhdfs")
#: the port of ``webhdfs://host/...`` without one: the NameNode's default HTTP port
WEBHDFS_DEFAULT_PORT = 9870
#: Remote files up to this size are read into memory whole; larger ones are copied in
#: ``SPOOL_CHUNK`` pieces to a local scratch file and memory-mapped, so a worker's memory stays
#: bounded by the chunk, not the segment (a 1 GiB segment costs 1 GiB of local disk instead).
IN_MEMORY_LIMIT = 64 << 20
SPOOL_CHUNK = 8 << 20

FILE, DIR, SYMLINK, OTHER = "file", "dir", "symlink", "other"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry:
    """One listed file or folder; ``rel`` is ``/``-separated from the dump root (``.`` is the root)."""

    rel: str
    kind: str  # file | dir | symlink | other
    size: int | None
    mtime_ns: int | None

    @property
    def name(self) -> str:
        return posixpath.basename(self.rel)


@dataclass
class Listing:
    """The whole tree under a dump root, listed once. ``errors`` holds folders that could not be
    listed (their ``strerror``); asking for their children raises ``OSError`` again."""

    entries: dict[str, Entry] = field(default_factory=dict)
    children_of: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        self.entries[entry.rel] = entry
        if entry.rel != ".":
            self.children_of.setdefault(parent(entry.rel), []).append(entry.rel)
        if entry.kind == DIR:
            self.children_of.setdefault(entry.rel, [])

    def get(self, rel: str) -> Entry | None:
        return self.entries.get(rel)

    def kind(self, rel: str) -> str | None:
        entry = self.entries.get(rel)
        return None if entry is None else entry.kind

    def children(self, rel: str) -> list[Entry]:
        """The entries directly inside folder ``rel``, sorted by name."""
        if rel in self.errors:
            raise OSError(0, self.errors[rel])
        return sorted((self.entries[c] for c in self.children_of.get(rel, [])), key=lambda e: e.name)

    def files_under(self, rel: str) -> list[Entry]:
        """Every non-folder entry under ``rel``, in ``os.walk`` order (a folder's entries, then its
        sub-folders), not descending into symbolic links."""
        out: list[Entry] = []
        try:
            children = self.children(rel)
        except OSError:
            return out
        out.extend(c for c in children if c.kind != DIR)
        for c in children:
            if c.kind == DIR:
                out.extend(self.files_under(c.rel))
        return out


def parent(rel: str) -> str:
    head = posixpath.dirname(rel)
    return head or "."


def join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


@dataclass(frozen=True)
class DumpLocation:
    """A dump root: ``filesystem`` and ``root`` (its path there). ``display`` is what to print and
    record as the input (a local dump as it was given, else the URI without credentials)."""

    filesystem: pafs.FileSystem
    root: str
    display: str
    scheme: str = ""  # "" for local storage
    netloc: str = ""
    query: str = ""
    fs_base: str = ""  # the filesystem path of scheme://netloc/ (S3: the bucket)

    @property
    def is_local(self) -> bool:
        return not self.scheme

    def fs_path(self, rel: str) -> str:
        return self.root if rel == "." else posixpath.join(self.root, rel)

    def display_of(self, rel: str) -> str:
        return self.display if rel == "." else posixpath.join(self.display.split("?", 1)[0], rel)

    def task_path(self, rel: str) -> str:
        """What a worker opens for ``rel``: a local path, or a URI of this storage (query included,
        credentials not)."""
        path = self.fs_path(rel)
        if self.is_local:
            return path
        inside = path[len(self.fs_base):] if self.fs_base and path.startswith(self.fs_base) else path
        return urlunsplit((self.scheme, self.netloc, quote("/" + inside.lstrip("/")), self.query, ""))

    def info(self, rel: str = ".") -> Entry:
        """The root (or ``rel``) itself; kind ``other`` if it does not exist."""
        if self.is_local:
            return _local_entry(self.fs_path(rel), rel)
        info = _call(self, lambda: self.filesystem.get_file_info(self.fs_path(rel)))
        return _remote_entry(info, rel)

    def listing(self) -> Listing:
        """List everything under the root, recursively, in one go."""
        listing = Listing()
        self._list_into(listing, ".")
        return listing

    def listing_of_child(self, name: str, *also: str) -> Listing:
        """The root itself, the files ``also`` beside ``name`` if they exist, and everything under
        ``name``: what is needed to audit one partition folder of a log dir without listing its
        siblings."""
        listing = Listing()
        top = self.info()
        listing.add(Entry(".", top.kind, top.size, top.mtime_ns))
        for other in also:
            entry = self.info(other)
            if entry.kind != OTHER:
                listing.add(entry)
        self._list_into(listing, name)
        return listing

    def _list_into(self, listing: Listing, rel: str) -> None:
        top = self.info(rel)
        listing.add(Entry(rel, top.kind, top.size, top.mtime_ns))
        if top.kind != DIR:
            return
        if self.is_local:
            _walk_local(self.fs_path(rel), rel, listing)
            return
        base = self.fs_path(rel).rstrip("/")
        try:
            infos = self.filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
        except OSError as err:
            listing.errors[rel] = " ".join(str(err).split())
            return
        for info in sorted(infos, key=lambda i: i.path):
            sub = info.path[len(base):].lstrip("/")
            if sub:
                listing.add(_remote_entry(info, join(rel, sub)))

    def parent(self) -> DumpLocation | None:
        """The folder holding the root; ``None`` at the top of the storage (an S3 bucket)."""
        root = self.root.rstrip("/")
        head = posixpath.dirname(root)
        if not head or head == root or (self.scheme == "s3" and "/" not in root):
            return None
        if self.is_local:
            return replace(self, root=head, display=head)
        path, _, query = self.display.partition("?")
        display = posixpath.dirname(path.rstrip("/")) + (f"?{query}" if query else "")
        return replace(self, root=head, display=display)

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes:
        """A small file's bytes (at most ``limit``); ``OSError`` if it cannot be read."""
        if self.is_local:
            with open(self.fs_path(rel), "rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        with self.filesystem.open_input_stream(self.fs_path(rel)) as handle:
            data: bytes = handle.read() if limit is None else handle.read(limit)
            return data


def _local_entry(path: str, rel: str) -> Entry:
    try:
        st = os.lstat(path)
    except OSError:
        return Entry(rel, OTHER, None, None)
    if stat.S_ISLNK(st.st_mode):
        kind = SYMLINK
    elif stat.S_ISDIR(st.st_mode):
        kind = DIR
    elif stat.S_ISREG(st.st_mode):
        kind = FILE
    else:
        kind = OTHER
    return Entry(rel, kind, st.st_size, st.st_mtime_ns)


def _walk_local(path: str, rel: str, listing: Listing) -> None:
    try:
        with os.scandir(path) as it:
            names = sorted(e.name for e in it)
    except OSError as err:
        listing.errors[rel] = err.strerror or type(err).__name__
        return
    for name in names:
        child = _local_entry(os.path.join(path, name), join(rel, name))
        listing.add(child)
        if child.kind == DIR:
            _walk_local(os.path.join(path, name), child.rel, listing)


def _remote_entry(info: pafs.FileInfo, rel: str) -> Entry:
    kind = {pafs.FileType.File: FILE, pafs.FileType.Directory: DIR}.get(info.type, OTHER)
    size = info.size if kind == FILE else None
    return Entry(rel, kind, size, info.mtime_ns)


def _call(location: DumpLocation, action: Callable[[], T]) -> T:
    """``action()``, with a storage error turned into a ``UsageError`` that names the dump."""
    try:
        return action()
    except OSError as err:
        raise UsageError(_storage_hint(location.display, err)) from None


def _storage_hint(display: str, err: Exception) -> str:
    text = " ".join(str(err).split())
    hint = ""
    if display.startswith("s3://"):
        hint = ("; check the bucket, the endpoint (AWS_ENDPOINT_URL or ?endpoint_override=host:port&scheme=http) "
                "and the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)")
    elif display.startswith("webhdfs://"):
        hint = ("; check the NameNode's HTTP address (webhdfs://namenode:9870/path), that WebHDFS is enabled "
                "(dfs.webhdfs.enabled) and that the DataNodes are reachable")
    return f"cannot read the dump {display}: {text}{hint}"


def is_remote_path(path: str) -> bool:
    """Whether a ``FileTask.path`` is a URI of remote storage (else a local path)."""
    scheme = urlsplit(path).scheme
    return scheme in REMOTE_SCHEMES


def resolve_dump(dump: str | os.PathLike[str] | DumpLocation) -> DumpLocation:
    """The storage and root of a dump argument: a local path, ``file://``, ``s3://``, ``webhdfs://``
    or ``hdfs://`` URI (a ``DumpLocation`` is returned as it is). Raises ``UsageError`` for an unknown scheme or
    storage that cannot be reached; a root that does not exist is reported by the caller
    (``info().kind == "other"``)."""
    if isinstance(dump, DumpLocation):
        return dump
    path = local_path(dump)
    if path is not None:
        return _local(path)
    assert isinstance(dump, str)  # local_path takes every os.PathLike
    parts = urlsplit(dump)
    scheme = parts.scheme.lower()
    if scheme == "file":  # of another host
        raise UsageError(f"{dump}: a file:// URI must name a local path (file:///path)")
    if scheme not in REMOTE_SCHEMES:
        raise UsageError(f"{dump}: dumps are read from local paths, file://, s3://, webhdfs:// or hdfs:// URIs, "
                         f"not {scheme}://")
    netloc = parts.netloc.rsplit("@", 1)[-1]  # user:secret@ stays out of what is printed
    display = urlunsplit((scheme, netloc, parts.path, parts.query, ""))
    if scheme == "hdfs":
        check_libhdfs(display)
    try:
        if scheme == "webhdfs":
            filesystem, fs_base = _filesystem(scheme, parts.netloc, parts.query)
            root = unquote(parts.path) or "/"
        else:
            filesystem, root = pafs.FileSystem.from_uri(dump)
            _, fs_base = _filesystem(scheme, parts.netloc, parts.query)
    except (OSError, ValueError) as err:  # pyarrow.ArrowInvalid is a ValueError
        raise UsageError(_storage_hint(display, err)) from None
    location = DumpLocation(filesystem, root.rstrip("/") or root, display, scheme, netloc, parts.query, fs_base)
    if scheme == "s3" and location.root and location.info().kind == OTHER:
        bucket = location.root.split("/", 1)[0]
        found = _call(location, lambda: filesystem.get_file_info(bucket))
        if found.type == pafs.FileType.NotFound:
            raise UsageError(f"bucket {bucket!r} not found for {display}; check the bucket name and the "
                             "endpoint (AWS_ENDPOINT_URL or ?endpoint_override=host:port&scheme=http)")
    return location


def check_libhdfs(display: str) -> None:
    """``UsageError`` unless pyarrow's ``HadoopFileSystem`` can find Hadoop's native libhdfs."""
    if os.environ.get("HADOOP_HOME") or os.environ.get("ARROW_LIBHDFS_DIR"):
        return
    raise UsageError(f"{display}: hdfs:// needs Hadoop's libhdfs and a JVM on this machine "
                     "(set HADOOP_HOME, or ARROW_LIBHDFS_DIR to the folder of libhdfs.so, and "
                     "CLASSPATH=$(hadoop classpath --glob)); without them use webhdfs://namenode:<http port>/path "
                     "(the NameNode's WebHDFS REST API, port 9870 by default)")


def webhdfs_filesystem(netloc: str, query: str = "") -> pafs.FileSystem:
    """A ``pyarrow.fs`` file system over the WebHDFS REST API of the NameNode at ``netloc``
    (``host[:port]``); ``query`` may name the Hadoop user (``user=NAME``)."""
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    from txn_audit.ingest.webhdfs import WebHdfs

    parts = urlsplit(f"//{netloc}")
    if not parts.hostname:
        raise ValueError(f"webhdfs://{netloc}: no NameNode host")
    settings = dict(parse_qsl(query))
    unknown = sorted(set(settings) - {"user"})
    if unknown:
        raise ValueError(f"unknown webhdfs:// option {unknown[0]!r} (only user=NAME)")
    user = settings.get("user") or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    client = WebHdfs(parts.hostname, port=parts.port or WEBHDFS_DEFAULT_PORT, user=user)
    return PyFileSystem(FSSpecHandler(client))


def _local(path: Path) -> DumpLocation:
    absolute = str(path.resolve()) if os.path.lexists(path) else str(path.absolute())
    return DumpLocation(pafs.LocalFileSystem(), absolute, str(path))


@lru_cache(maxsize=16)
def _filesystem(scheme: str, netloc: str, query: str) -> tuple[pafs.FileSystem, str]:
    """One filesystem per storage and settings in a process (S3 clients are not free), with the
    path of its ``scheme://netloc/`` (for S3 the bucket)."""
    if scheme == "webhdfs":
        return webhdfs_filesystem(netloc.rsplit("@", 1)[-1], query), ""
    filesystem, base = pafs.FileSystem.from_uri(urlunsplit((scheme, netloc, "/", query, "")))
    return filesystem, base.rstrip("/")


def _open_remote(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path in it of a URI that ``DumpLocation.task_path`` built."""
    parts = urlsplit(path)
    filesystem, base = _filesystem(parts.scheme, parts.netloc, parts.query)
    inside = unquote(parts.path)
    return filesystem, (posixpath.join(base, inside.lstrip("/")) if base else inside)


@contextmanager
def open_buffer(path: str) -> Iterator[bytes | mmap.mmap]:
    """A remote file as one buffer for the decoders: bytes when small, else a read-only map of a
    local scratch copy (in ``SPARK_LOCAL_DIRS`` on an executor) that is removed afterwards."""
    filesystem, fs_path = _open_remote(path)
    with filesystem.open_input_file(fs_path) as handle:
        size = handle.size()
        if size <= IN_MEMORY_LIMIT:
            yield handle.read()
            return
        scratch = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
        with tempfile.TemporaryFile(prefix="txn-audit-spool-", dir=scratch) as spool:
            while chunk := handle.read(SPOOL_CHUNK):
                spool.write(chunk)
            spool.flush()
            mapped = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                yield mapped
            finally:
                mapped.close()


def open_regular(path: str) -> BinaryIO:
    """``open(path, "rb")`` that refuses anything but a regular file with an ``OSError``.

    A FIFO put where a segment was would otherwise block the worker forever (hence
    ``O_NONBLOCK``, which regular files ignore); a folder or device is refused the same way.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def open_stream(path: str) -> Iterator[BinaryIO]:
    """A file (local path or remote URI) as a buffered binary stream, for reading line by line."""
    if not is_remote_path(path):
        with open_regular(path) as handle:
            yield handle
        return
    filesystem, fs_path = _open_remote(path)
    with filesystem.open_input_stream(fs_path) as raw:
        yield io.BufferedReader(raw, 1 << 20)
