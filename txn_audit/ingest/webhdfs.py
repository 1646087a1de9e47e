"""HDFS over Hadoop's WebHDFS REST API: fsspec's ``WebHDFS`` client, made strict for txn-audit.

``storage.webhdfs_filesystem`` wraps it as a ``pyarrow.fs.PyFileSystem``. Three changes to the
client as fsspec ships it:

- every failure is an ``OSError`` (fsspec raises ``RuntimeError`` or ``ValueError`` for most of the
  NameNode's ``RemoteException`` answers; ``FileNotFoundError``, ``PermissionError`` and
  ``FileExistsError`` keep their meaning), so callers catch one family of errors;
- a refused rename or delete (WebHDFS answers ``{"boolean": false}`` with status 200) raises
  instead of passing silently;
- a file is written with one CREATE carrying its first block (fsspec creates an empty file and
  then appends, two more round trips per file), further blocks by APPEND;
- every request has a timeout (the HTTP client has none by default: a stalled NameNode or
  DataNode would hang the reader forever), and listings carry the modification time as ``mtime``.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from fsspec.implementations.webhdfs import WebHDFile, WebHDFS

#: seconds to connect, and to wait for the next bytes of an answer
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0

_ERRORS: dict[str, type[OSError]] = {
    "FileNotFoundException": FileNotFoundError,
    "FileAlreadyExistsException": FileExistsError,
    "AccessControlException": PermissionError,
    "SecurityException": PermissionError,
}


class WebHdfs(WebHDFS):  # type: ignore[misc]  # fsspec ships no type information
    """fsspec's WebHDFS client with OSError-only failures, checked renames and deletes, timeouts."""

    def _connect(self) -> None:
        super()._connect()
        self.session.request = functools.partial(_with_timeout, self.session.request)

    def _call(self, op: str, method: str = "get", path: str | None = None, data: Any = None,
              redirect: bool = True, **kwargs: Any) -> Any:
        try:
            return super()._call(op, method, path, data, redirect, **kwargs)
        except OSError:
            raise
        except (RuntimeError, ValueError) as err:
            text = str(err)
            kind = next((cls for name, cls in _ERRORS.items() if name in text), OSError)
            raise kind(f"WebHDFS {op} {path}: {text}") from None

    @staticmethod
    def _process_info(info: dict[str, Any]) -> dict[str, Any]:
        info = WebHDFS._process_info(info)
        millis = info.get("modificationTime")
        if millis is not None:
            info["mtime"] = datetime.fromtimestamp(millis / 1000, UTC)
        return info

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              replication: int | None = None, permissions: int | None = None, **kwargs: Any) -> Any:
        if "r" in mode:
            return super()._open(path, mode, block_size, autocommit, replication, permissions, **kwargs)
        if mode != "wb" or not autocommit:
            raise OSError(f"WebHDFS {path}: only whole files are written (mode wb), not {mode}")
        return _WholeFile(self, path, mode=mode, block_size=block_size or self.blocksize,
                          tempdir=self.tempdir, autocommit=True, replication=replication, permissions=permissions)

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        out = self._call("RENAME", method="put", path=path1, destination=path2)
        if not out.json().get("boolean"):
            raise OSError(f"WebHDFS refused to rename {path1} to {path2} (the source is missing or the "
                          "destination exists)")

    def rm(self, path: str, recursive: bool = False, **kwargs: Any) -> None:
        out = self._call("DELETE", method="delete", path=path, recursive="true" if recursive else "false")
        if not out.json().get("boolean"):
            raise FileNotFoundError(f"WebHDFS could not delete {path}")


class _WholeFile(WebHDFile):  # type: ignore[misc]
    """A file written by CREATE with its first block, then APPEND for each further block."""

    def _initiate_upload(self) -> None:
        self._created = False

    def _upload_chunk(self, final: bool = False) -> bool:
        data = self.buffer.getvalue()
        if self._created:
            op, method, extra = "APPEND", "POST", {}
        else:
            op, method, extra = "CREATE", "PUT", {"overwrite": "true"}
        answer = self.fs._call(op, method, self.path, redirect=False, **extra)
        location = self.fs._apply_proxy(answer.headers["Location"])
        done = self.fs.session.request(method, location, data=data,
                                       headers={"content-type": "application/octet-stream"})
        done.raise_for_status()
        self._created = True
        return True


def _with_timeout(request: Any, method: str, url: str, **kwargs: Any) -> Any:
    kwargs.setdefault("timeout", (CONNECT_TIMEOUT, READ_TIMEOUT))
    return request(method, url, **kwargs)
