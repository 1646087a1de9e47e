"""The storage servers' jars from Maven Central, cached outside the repository.

``fetch_s3proxy()`` copies S3Proxy's self-contained jar (``org.gaul:s3proxy``, classifier
``jar-with-dependencies``) into ``~/.cache/txn-audit/stores/s3proxy-<version>/``;
``fetch_hdfs()`` copies Hadoop's shaded minicluster (``hadoop-client-minicluster``, the release
of pyspark's Hadoop client) with its runtime dependencies into ``hadoop-<version>/lib`` and
compiles the launcher ``MiniHdfs.java`` there. ``TXN_AUDIT_STORES_CACHE`` moves the cache. A second
call finds everything in place and costs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.maven import copy_dependencies

__all__ = ["HADOOP_VERSION", "S3PROXY_VERSION", "HdfsDist", "StoreToolError", "cache_root", "fetch_hdfs",
           "fetch_s3proxy", "java_binary"]

#: the newest S3Proxy on Maven Central that runs on Java 17 and takes the AWS SDK's multipart
#: uploads (2.x refuses pyarrow's UploadPart requests)
S3PROXY_VERSION = "4.0.0"
#: the Hadoop client release pyspark ships
HADOOP_VERSION = "3.4.2"
#: extra jars the NameNode needs on Java 17: JAXB left the JDK in 11, and WebHDFS's Jersey
#: resources fail to load without it (every WebHDFS request would answer 500)
HADOOP_EXTRAS = (("javax.xml.bind", "jaxb-api", "2.3.1"),)
LAUNCHER = Path(__file__).resolve().parent / "MiniHdfs.java"


class StoreToolError(RuntimeError):
    """Something needed to run the storage servers is missing; the message says what."""


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "txn-audit" / "stores"
    return Path(os.environ.get("TXN_AUDIT_STORES_CACHE", default))


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return _need("java", "install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)")


def _need(binary: str, hint: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if binary in ("java", "javac") and home and (Path(home) / "bin" / binary).exists():
        return str(Path(home) / "bin" / binary)
    found = shutil.which(binary)
    if not found:
        raise StoreToolError(f"{binary} not found: {hint}")
    return found


def _dependency(group: str, artifact: str, version: str, classifier: str = "", transitive: bool = True) -> str:
    extra = f"<classifier>{classifier}</classifier>" if classifier else ""
    exclusions = ("" if transitive else
                  "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>")
    return (f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{extra}{exclusions}</dependency>")


def _maven_copy(home: Path, name: str, dependencies: list[str], *, log: bool) -> Path:
    """Maven copies ``dependencies`` (runtime scope) into ``home/lib``, once: its path."""
    lib = home / "lib"
    stamp = home / ".complete"
    if stamp.exists() and lib.is_dir():
        return lib
    mvn = _need("mvn", "install Maven (apt-get install -y maven)")
    home.mkdir(parents=True, exist_ok=True)
    body = "\n".join(dependencies)
    (home / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>txn-audit.stores</groupId><artifactId>{name}</artifactId><version>1</version>
  <dependencies>
{body}
  </dependencies>
</project>
""")
    if log:
        print(f"[stores] fetching {name} from Maven Central into {home}", flush=True)
    errors = copy_dependencies(mvn, home / "pom.xml", lib)
    if errors:
        raise StoreToolError(f"Maven could not fetch {name}:\n" + "\n".join(errors))
    stamp.write_text(name + "\n")
    return lib


def fetch_s3proxy(*, log: bool = True) -> Path:
    """S3Proxy's self-contained jar, fetched on first use."""
    home = cache_root() / f"s3proxy-{S3PROXY_VERSION}"
    lib = _maven_copy(home, f"s3proxy-{S3PROXY_VERSION}",
                      [_dependency("org.gaul", "s3proxy", S3PROXY_VERSION, "jar-with-dependencies", transitive=False)],
                      log=log)
    jars = sorted(lib.glob("s3proxy-*.jar"))
    if not jars:
        raise StoreToolError(f"no S3Proxy jar in {lib}")
    return jars[0]


@dataclass(frozen=True)
class HdfsDist:
    """The minicluster's jars and the compiled launcher."""

    home: Path

    @property
    def classpath(self) -> str:
        return f"{self.home / 'lib'}/*:{self.home / 'launcher'}"


def fetch_hdfs(*, log: bool = True) -> HdfsDist:
    """Hadoop's minicluster and the launcher, fetched and compiled on first use."""
    home = cache_root() / f"hadoop-{HADOOP_VERSION}"
    deps = [_dependency("org.apache.hadoop", "hadoop-client-minicluster", HADOOP_VERSION),
            *(_dependency(g, a, v, transitive=False) for g, a, v in HADOOP_EXTRAS)]
    _maven_copy(home, f"hadoop-{HADOOP_VERSION}", deps, log=log)
    dist = HdfsDist(home)
    out = home / "launcher"
    marker = out / "MiniHdfs.class"
    if not (marker.exists() and marker.stat().st_mtime >= LAUNCHER.stat().st_mtime):
        javac = _need("javac", "install a JDK 17 (apt-get install -y openjdk-17-jdk-headless)")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        run = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", f"{home / 'lib'}/*", str(LAUNCHER)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            shutil.rmtree(out, ignore_errors=True)
            raise StoreToolError(f"MiniHdfs.java does not compile against Hadoop {HADOOP_VERSION}:\n{run.stderr}")
    return dist
