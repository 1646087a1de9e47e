"""A Kafka release as jars from Maven Central, cached outside the repository.

``fetch(version)`` writes a one-off ``pom.xml`` naming ``org.apache.kafka:kafka_2.13`` and
``kafka-tools`` of that release (plus an SLF4J binding where the release's own runtime has none,
so that the broker writes its ``server.log``) and lets Maven copy them with every runtime
dependency into ``~/.cache/txn-audit/kafka/<version>/lib`` (``TXN_AUDIT_KAFKA_CACHE`` moves
it). The scenario client ``driver/TxnDriver.java`` is compiled there against that release's
``kafka-clients``. A second call finds everything in place and costs nothing.

Which main class runs which tool moved between releases; ``Dist.main_class`` looks the
candidates up in the jars rather than keeping a table of versions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tools.maven import copy_dependencies

__all__ = ["Dist", "HarnessError", "cache_root", "fetch", "fetch_artifact", "version_tuple"]

DRIVER_SOURCE = Path(__file__).resolve().parent / "driver" / "TxnDriver.java"
SCALA = "2.13"
# SLF4J 1.x binding for log4j2: releases from 4.0 ship log4j2 (or nothing) without one
LOG4J2_SLF4J = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3")

# tool -> candidate main classes, newest location first
MAIN_CLASSES: dict[str, tuple[str, ...]] = {
    "broker": ("kafka.Kafka",),
    "storage": ("kafka.tools.StorageTool",),
    "dump-log": ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"),
    "transactions": ("org.apache.kafka.tools.TransactionsCommand",),
    "zookeeper": ("org.apache.zookeeper.server.quorum.QuorumPeerMain",),
    "features": ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
    "consumer-groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                        "kafka.admin.ConsumerGroupCommand"),
}


class HarnessError(RuntimeError):
    """Something the harness cannot do here; the message says what is missing."""


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "txn-audit" / "kafka"
    return Path(os.environ.get("TXN_AUDIT_KAFKA_CACHE", default))


def _pom(version: str) -> str:
    deps = [("org.apache.kafka", f"kafka_{SCALA}", version), ("org.apache.kafka", "kafka-tools", version)]
    if version_tuple(version) >= (4, 0):
        deps.append(LOG4J2_SLF4J)
    body = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>txn-audit.realkafka</groupId><artifactId>kafka-{version}</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


@dataclass
class Dist:
    """A fetched release: its jars and the compiled scenario client."""

    version: str
    home: Path
    _classes: dict[str, str] = field(default_factory=dict)

    @property
    def lib(self) -> Path:
        return self.home / "lib"

    @property
    def driver_classes(self) -> Path:
        return self.home / "driver"

    @property
    def classpath(self) -> str:
        return f"{self.lib}/*"

    @property
    def zookeeper(self) -> bool:
        """Releases before 3.3 cannot run without ZooKeeper (KRaft was early access)."""
        return version_tuple(self.version) < (3, 3)

    @property
    def log4j2(self) -> bool:
        return version_tuple(self.version) >= (4, 0)

    def has_tool(self, tool: str) -> bool:
        try:
            self.main_class(tool)
        except HarnessError:
            return False
        return True

    def main_class(self, tool: str) -> str:
        if tool in self._classes:
            return self._classes[tool]
        wanted = {c.replace(".", "/") + ".class": c for c in MAIN_CLASSES[tool]}
        for jar in sorted(self.lib.glob("*.jar")):
            with zipfile.ZipFile(jar) as z:
                names = set(z.namelist())
            for entry, cls in wanted.items():
                if entry in names:
                    self._classes[tool] = cls
                    return cls
        raise HarnessError(f"Kafka {self.version} has no {tool} tool (looked for {', '.join(MAIN_CLASSES[tool])})")

    def java(self, tool: str, *args: str, driver: bool = False) -> list[str]:
        """The command line that runs a tool's main class (or the scenario client) on this release."""
        cp = self.classpath + (f":{self.driver_classes}" if driver else "")
        main = "TxnDriver" if driver else self.main_class(tool)
        return [java_binary(), "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", "-cp", cp, main, *args]


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise HarnessError("java not found: install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)")
    return found


def _need(binary: str, hint: str) -> str:
    found = shutil.which(binary)
    if not found:
        raise HarnessError(f"{binary} not found: {hint}")
    return found


def fetch(version: str, *, log: bool = True) -> Dist:
    """The release's jars and compiled client, fetched and built on first use."""
    home = cache_root() / version
    dist = Dist(version=version, home=home)
    stamp = home / ".complete"
    if not stamp.exists():
        mvn = _need("mvn", "install Maven (apt-get install -y maven)")
        home.mkdir(parents=True, exist_ok=True)
        (home / "pom.xml").write_text(_pom(version))
        if log:
            print(f"[realkafka] fetching Kafka {version} from Maven Central into {home}", flush=True)
        errors = copy_dependencies(mvn, home / "pom.xml", dist.lib)
        if errors:
            raise HarnessError(f"Maven could not fetch Kafka {version}:\n" + "\n".join(errors))
        stamp.write_text(version + "\n")
    _compile_driver(dist)
    return dist


def fetch_artifact(dist: Dist, artifact: str, classifier: str) -> Path:
    """One more jar of the release (``org.apache.kafka:<artifact>:<version>:jar:<classifier>``,
    such as the test fixtures that hold ``LocalTieredStorage``), copied by Maven into the
    release's cache, ``<home>/extra/``, outside the broker's own classpath: its path."""
    name = f"{artifact}-{dist.version}-{classifier}.jar"
    jar = dist.home / "extra" / name
    if jar.exists():
        return jar
    mvn = _need("mvn", "install Maven (apt-get install -y maven)")
    run = subprocess.run(
        [mvn, "-q", "-B", "-f", str(dist.home / "pom.xml"), "dependency:copy",
         f"-Dartifact=org.apache.kafka:{artifact}:{dist.version}:jar:{classifier}",
         f"-DoutputDirectory={jar.parent}"],
        capture_output=True, text=True,
    )
    if run.returncode != 0 or not jar.exists():
        errors = [line for line in run.stdout.splitlines() + run.stderr.splitlines() if "ERROR" in line]
        raise HarnessError(f"Maven could not fetch {name}:\n" + "\n".join(errors[:5]))
    return jar


def _compile_driver(dist: Dist) -> None:
    out = dist.driver_classes
    marker = out / "TxnDriver.class"
    if marker.exists() and marker.stat().st_mtime >= DRIVER_SOURCE.stat().st_mtime:
        return
    javac = _need("javac", "install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    run = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", dist.classpath, str(DRIVER_SOURCE)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise HarnessError(f"the scenario client does not compile against Kafka {dist.version}:\n{run.stderr}")
