"""What a printed fix must be: one shell command naming a Kafka tool, and nothing else (shared by
the fixes' tests)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

#: the scripts of Kafka's ``bin/`` a fix may run
KAFKA_TOOLS = frozenset({"kafka-transactions.sh", "kafka-topics.sh", "kafka-delete-records.sh",
                         "kafka-consumer-groups.sh", "kafka-get-offsets.sh", "kafka-features.sh"})
#: what the shell reads as something other than a word of the command (``;``, ``&&``, ``|``, ``>``, ...)
_OPERATOR = re.compile(r"^[;&|<>()]+$")


def command_words(line: str, bootstrap: str | None = None, command_config: str | None = None) -> list[str]:
    """The words of ``line`` as the shell splits them, once checked to be one command of a Kafka
    tool: no operator, no prose (every word that is not an option is the value of the option
    before it, or the tool's one subcommand), the cluster named by ``bootstrap`` (and
    ``command_config``) when given. AssertionError otherwise."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    assert words and words[0] in KAFKA_TOOLS, f"not a Kafka tool: {line!r}"
    assert not [w for w in words if _OPERATOR.match(w)], f"a shell operator in {line!r}"
    assert words == shlex.split(line), f"not plain words: {line!r}"
    bare = [i for i, w in enumerate(words[1:], 1) if not w.startswith("--") and not words[i - 1].startswith("--")]
    assert len(bare) <= 1, f"words that are not options in {line!r}: {[words[i] for i in bare]}"
    if bootstrap is not None:
        assert words[words.index("--bootstrap-server") + 1] == bootstrap, line
    if command_config is not None:
        assert words[words.index("--command-config") + 1] == command_config, line
    return words


def fix_block(stdout: str) -> list[str]:
    """The lines of the block ``Fixes, one command per line:`` of ``scan``'s output ([] when
    absent): to the table after it, or the line that counts what is hidden."""
    lines = stdout.splitlines()
    if "Fixes, one command per line:" not in lines:
        return []
    block = []
    for line in lines[lines.index("Fixes, one command per line:") + 1:]:
        if line.startswith("Partitions whose LSO") or re.match(r"^\d+ (incident|finding)", line):
            break
        block.append(line)
    return block


def bash_syntax_error(script: Path) -> str:
    """``bash -n`` on ``script``: its complaint, "" when bash reads it."""
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else done.stderr or f"exit code {done.returncode}"
