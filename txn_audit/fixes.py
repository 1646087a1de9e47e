"""The fixes an operator runs: each incident's commands, in the form the dump's brokers take,
naming the cluster as ``scan --bootstrap-server`` and ``--command-config`` give it; printed under
the incidents, in the JSON and in ``fixes.sh``.

Every command the rules give (a finding's ``remediation``, an incident's ``commands``) is one
shell command and nothing else; the tables keep it naming the cluster ``<broker>``
(``detect.words.BROKER_PLACEHOLDER``), the dump's facts whatever cluster it is run against, and
``Connection.fill`` fills it where the options give the cluster. The placeholder stays where they
do not; ``--command-config`` is added only where given (a cluster that needs no credentials takes
none).

**The brokers' release** (``broker_release``) decides the form of ``kafka-transactions.sh
abort``: brokers of Kafka 3.0 or later find a transaction by its first offset (``--start-offset``,
through DescribeProducers, KIP-664); brokers before 3.0 do not answer DescribeProducers and take
``--producer-id``, ``--producer-epoch`` and ``--coordinator-epoch`` instead (a finding's
``remediation_pre_3_0``). The dump tells the release as far as this rule goes:

* a KRaft cluster (a copy of the ``__cluster_metadata`` log, binary or text, or a finalized
  ``metadata.version`` read from it) runs Kafka 3.0 or later: Kafka 2.8's KRaft mode (early access)
  allocated no producer ids for transactions (KIP-730 came with 3.0), so a KRaft dump that holds
  transactions is of 3.0 or later;
* anything else (log dirs of a ZooKeeper cluster, ``meta.properties`` version 0; a text dump
  without the metadata log) is of a release the dump does not tell: ZooKeeper clusters ran every
  release up to 3.9, and nothing in the log's record formats, the checkpoints or the producer
  snapshots changed at 3.0. Both forms are then given, each under a ``#`` line that says which
  brokers take it.

**fixes.sh** (``fixes_script``, written beside ``summary.json`` by ``scan --out``) is a script an
operator reviews, then runs: every incident with a command, its paragraph, its findings and their
evidence as ``#`` lines, and each command commented out, so that running it as written changes
nothing (``set -euo pipefail`` stops it at the first command that fails once uncommented).
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from txn_audit.detect.incidents import incident_commands
from txn_audit.detect.words import BROKER_PLACEHOLDER
from txn_audit.formats.layout import CLUSTER_METADATA_TOPIC
from txn_audit.outputs import FIXES_SCRIPT
from txn_audit.results import Finding, Incident
from txn_audit.timeparse import format_time_ms

if TYPE_CHECKING:
    from txn_audit.ingest.inventory import Inventory

__all__ = ["FIXES_SCRIPT", "UNKNOWN_RELEASE", "BrokerRelease", "Connection", "Fix", "Release", "broker_release",
           "fix_lines", "fixes", "fixes_json", "fixes_script"]

#: the width the script's comments wrap at
_COMMENT_WIDTH = 100


@dataclass(frozen=True)
class Connection:
    """How the commands reach the cluster: ``--bootstrap-server`` (``HOST:PORT[,HOST:PORT...]``)
    and ``--command-config`` (the client properties file of a secured cluster), each None when not
    given."""

    bootstrap_server: str | None = None
    command_config: str | None = None

    def fill(self, command: str) -> str:
        """``command`` naming the cluster: ``--bootstrap-server <broker>`` filled with the bootstrap
        server where given, ``--command-config FILE`` added after it where given; each quoted for
        the shell where it needs it. A command that names no cluster is returned as it is."""
        marker = f" --bootstrap-server {BROKER_PLACEHOLDER}"
        head, found, rest = command.partition(marker)
        if not found or (self.bootstrap_server is None and self.command_config is None):
            return command
        server = BROKER_PLACEHOLDER if self.bootstrap_server is None else shlex.quote(self.bootstrap_server)
        config = "" if self.command_config is None else f" --command-config {shlex.quote(self.command_config)}"
        return f"{head} --bootstrap-server {server}{config}{rest}"

    def fill_text(self, text: str | None) -> str | None:
        """``fill`` on each line of ``text`` (a remediation: commands one a line, or why none)."""
        return None if text is None else "\n".join(self.fill(line) for line in text.split("\n"))


class Release(StrEnum):
    """What the dump tells of its brokers' release, as far as the commands' form goes."""

    SINCE_3_0 = "3.0 or later"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class BrokerRelease:
    """The brokers' release (``broker_release``) and the evidence it was told from."""

    release: Release
    how: str

    def to_json(self) -> dict[str, str]:
        return {"release": self.release.value, "how": self.how}


#: the release of a dump nothing was read of (a result built without its inventory)
UNKNOWN_RELEASE = BrokerRelease(Release.UNKNOWN, "the dump was not read for it")


def broker_release(inventory: Inventory) -> BrokerRelease:
    """The release of the dump's brokers, as far as the form of the commands goes (the module's
    docstring gives the rule)."""
    metadata_version = inventory.metadata_configs.metadata_version
    if metadata_version is not None:
        return BrokerRelease(Release.SINCE_3_0, f"a KRaft cluster at metadata.version level {metadata_version}")
    kraft = (inventory.metadata_newest_ms is not None or inventory.metadata_configs_offset > -2
             or any(row.get("topic") == CLUSTER_METADATA_TOPIC for row in inventory.segments))
    if kraft:
        return BrokerRelease(Release.SINCE_3_0, f"a KRaft cluster (the dump holds {CLUSTER_METADATA_TOPIC}): "
                             "transactions run on KRaft from Kafka 3.0")
    return BrokerRelease(Release.UNKNOWN, f"no {CLUSTER_METADATA_TOPIC} log in the dump (a ZooKeeper cluster, or a "
                         "copy without it): the release is not told, so both forms are given")


@dataclass(frozen=True)
class Fix:
    """An incident's commands as they are run: ``commands`` in the form of brokers of Kafka 3.0
    or later, ``commands_pre_3_0`` in the form of brokers before 3.0 where the dump does not rule
    them out (else empty); both filled (``Connection.fill``)."""

    incident: Incident
    commands: tuple[str, ...]
    commands_pre_3_0: tuple[str, ...]

    @property
    def title(self) -> str:
        """What it fixes, on one line: severity, kind, partitions and the incident's id."""
        i = self.incident
        return f"{i.severity.value.upper()} {i.kind} {', '.join(i.partitions) or '-'} ({i.incident_id})"


def fixes(incidents: Iterable[Incident], findings: Sequence[Finding], release: BrokerRelease,
          connection: Connection) -> list[Fix]:
    """The fix of each of ``incidents`` that has a command, in their order."""
    found = []
    for incident in incidents:
        if not incident.commands:
            continue
        members = [f for f in findings if f.incident_id == incident.incident_id]
        pre_3_0 = incident_commands(members, pre_3_0=True) if release.release is Release.UNKNOWN else []
        found.append(Fix(incident, tuple(connection.fill(c) for c in incident.commands),
                         tuple(connection.fill(c) for c in pre_3_0)))
    return found


def fix_lines(fix: Fix) -> list[str]:
    """The fix's commands, one a line, under ``#`` lines that say which brokers take them where
    the forms differ: what is printed under the incidents and, commented out, in ``fixes.sh``."""
    if not fix.commands_pre_3_0 or fix.commands_pre_3_0 == fix.commands:
        return list(fix.commands)
    return ["# brokers of Kafka 3.0 or later:", *fix.commands,
            "# brokers before Kafka 3.0 (the dump does not tell which; run one form only):", *fix.commands_pre_3_0]


def _comment(text: str, indent: str = "") -> list[str]:
    """``text`` as ``#`` lines wrapped at words (each of its own lines kept)."""
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        wrapped = textwrap.wrap(line, _COMMENT_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                break_long_words=False, break_on_hyphens=False) or [indent]
        lines.extend(f"# {w}".rstrip() for w in wrapped)
    return lines


def fixes_script(all_fixes: Sequence[Fix], findings: Sequence[Finding], *, dump: str, as_of_ms: int,
                 release: BrokerRelease, connection: Connection) -> str:
    """``fixes.sh``: the fixes, to be reviewed, then run by removing the ``# `` before each
    command chosen (the module's docstring)."""
    server = (f"--bootstrap-server {connection.bootstrap_server}" if connection.bootstrap_server is not None
              else f"no --bootstrap-server given: replace {BROKER_PLACEHOLDER} with the cluster's HOST:PORT")
    config = (f"--command-config {connection.command_config}" if connection.command_config is not None
              else "no --command-config given: a secured cluster needs one (add --command-config FILE after the "
                   "bootstrap server)")
    out = ["#!/usr/bin/env bash"]
    out += _comment(f"txn-audit fixes for {dump}, audited at {format_time_ms(as_of_ms)}.")
    out += _comment("Review each fix, then remove the '# ' before each command to run. As written, this script runs "
                    "nothing. Run a fix only once: an abort run twice writes its marker twice.")
    out += _comment(f"Brokers' release: {release.release.value} ({release.how}).")
    out += _comment(f"Cluster: {server}; {config}.")
    out += ["set -euo pipefail", ""]
    if not all_fixes:
        out += ["# No incident has a command to run.", ""]
    for number, fix in enumerate(all_fixes, 1):
        out += [f"# [{number}] {fix.title}"]
        out += _comment(fix.incident.summary)
        out += ["# Findings:"]
        for f in findings:
            if f.incident_id == fix.incident.incident_id:
                place = f"{f.topic}-{f.partition}" if f.topic is not None else f.file or "-"
                out += _comment(f"- {f.severity.value} {f.kind} {place}: {f.evidence}", indent="  ")
        out += [line if line.startswith("#") else f"# {line}" for line in fix_lines(fix)]
        out += [""]
    return "\n".join(out)


def fixes_json(fix: Fix | None, incident: dict[str, Any]) -> dict[str, Any]:
    """An incident's JSON (``incident``: its columns) with its commands as ``fix`` gives them:
    ``commands`` filled, and ``commands_pre_3_0``."""
    if fix is None:
        return incident | {"commands_pre_3_0": []}
    return incident | {"commands": list(fix.commands), "commands_pre_3_0": list(fix.commands_pre_3_0)}
