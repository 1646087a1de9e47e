"""Exception hierarchy shared by every layer (pure Python, no third-party imports)."""

from __future__ import annotations


class TxnAuditError(Exception):
    """Base class of every error txn-audit raises on purpose."""


class UsageError(TxnAuditError):
    """The user asked for something that cannot be done (bad path, bad option value)."""


class OutputError(TxnAuditError):
    """An output could not be written: a full disk, a permission denied, its folder removed
    while it was written. The message names the path; the previous output is left as it was."""


class OutputInUseError(TxnAuditError):
    """Another run is writing the same output folder (``txn_audit.outputs.staged_output``'s lock)."""


class CorruptInputError(TxnAuditError):
    """Bytes that do not decode as the format they claim to be.

    ``kind`` is one of the ``decode_issues`` kinds (see ``txn_audit.formats.model.IssueKind``),
    ``position`` the byte offset inside the file or buffer where the problem was found.
    """

    def __init__(self, kind: str, position: int, detail: str) -> None:
        super().__init__(f"{kind} at byte {position}: {detail}")
        self.kind = kind
        self.position = position
        self.detail = detail
