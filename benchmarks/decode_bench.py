"""Header decode of v2 batches with CRC-32C verification, on one core, on one large segment.

Compares, over the same segment file (memory-mapped, in the page cache):

* ``fast_headers``: txn-audit's vectorised path (compiled walk + CRC, columns), in chunks;
* ``formats.segment``: txn-audit's reference walk (one ``BatchHeader`` per batch);
* kafka-python ``MemoryRecords``: batch iteration reading the header fields an audit needs,
  with ``validate_crc()``;
* a bare Python ``struct`` walk: one unpack of the 61-byte header per batch, with and without
  a ``crc32c`` call;
* a raw read of the same bytes (``readinto`` from the page cache).

Prints one Markdown table (batches/s, MB/s, ratio to kafka-python) plus the machine, the
load and the segment. Usage::

    python benchmarks/decode_bench.py [--segment-mb 1024] [--repeat 3] [--data-dir DIR]

The segment is written once by the sample generator at scale (``txn_audit.sample.large``)
into ``--data-dir`` (default: a folder in the system's temporary directory) and reused.
"""

from __future__ import annotations

import argparse
import mmap
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from txn_audit.formats import fast_headers
from txn_audit.formats.model import DecodeIssue
from txn_audit.formats.record_batch import ATTRIBUTES_OFFSET, HEADER_STRUCT, RECORD_BATCH_OVERHEAD
from txn_audit.formats.records import LOG_OVERHEAD
from txn_audit.formats.segment import iter_batches
from txn_audit.sample.large import write_large_dump


def segment_path(data_dir: Path, segment_mb: int) -> Path:
    """The benchmark segment of about ``segment_mb`` MiB, generated on first use."""
    folder = data_dir / f"large-{segment_mb}mb"
    done = folder / "complete"
    log = folder / "broker-1" / "bulk-0" / "00000000000000000000.log"
    if not done.exists():
        t = time.perf_counter()
        print(f"generating a {segment_mb} MiB segment in {folder} ...", file=sys.stderr)
        write_large_dump(folder, segment_bytes=segment_mb << 20)
        done.write_text("")
        print(f"  done in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return log


def run_fast(buf: mmap.mmap) -> int:
    n = 0
    for chunk in fast_headers.iter_header_chunks(buf, verify_crc=True):
        cols = chunk.columns
        n += len(cols)
        assert not chunk.issues and bool(cols.crc_ok.all())
    return n


def run_reference(buf: mmap.mmap) -> int:
    n = 0
    for item in iter_batches(buf, verify_crc=True):
        assert not isinstance(item, DecodeIssue)
        n += 1
    return n


def run_kafka_python(buf: mmap.mmap) -> int:
    from kafka.record import MemoryRecords  # type: ignore[import-untyped]

    records = MemoryRecords(buf)
    n = 0
    batch = records.next_batch()
    while batch is not None:
        # the header fields the batches table needs, then the CRC
        _ = (batch.base_offset, batch.last_offset, batch.magic, batch.compression_type, batch.timestamp_type,
             batch.is_transactional, batch.is_control_batch, batch.producer_id, batch.producer_epoch,
             batch.base_sequence, batch.last_sequence, batch.records_count, batch.first_timestamp,
             batch.max_timestamp, batch.leader_epoch, batch.crc, batch.size_in_bytes)
        assert batch.validate_crc()
        n += 1
        batch = records.next_batch()
    return n


def _struct_walk(buf: mmap.mmap, check_crc: bool) -> int:
    mv = memoryview(buf)
    unpack = HEADER_STRUCT.unpack_from
    header, framing, covered = RECORD_BATCH_OVERHEAD, LOG_OVERHEAD, ATTRIBUTES_OFFSET
    end = len(mv)
    pos = n = 0
    try:
        while pos + header <= end:
            fields = unpack(mv, pos)
            stop = pos + framing + fields[1]
            if check_crc and crc32c(mv[pos + covered : stop]) != fields[4]:
                raise AssertionError(f"CRC mismatch at {pos}")
            pos = stop
            n += 1
    finally:
        mv.release()
    return n


def run_struct_crc(buf: mmap.mmap) -> int:
    return _struct_walk(buf, True)


def run_struct_no_crc(buf: mmap.mmap) -> int:
    return _struct_walk(buf, False)


def run_raw_read(path: Path) -> int:
    chunk = bytearray(8 << 20)
    total = 0
    with open(path, "rb", buffering=0) as handle:
        while got := handle.readinto(chunk):
            total += got
    return total


def best_of(repeat: int, fn: Callable[[], int]) -> tuple[float, int]:
    best, result = float("inf"), 0
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                          if line.startswith("MemTotal")))
        ram = f"{mem_kb / (1 << 20):.1f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        ram = "RAM unknown"
    return f"{os.cpu_count()} CPUs ({model}), {ram}, Python {platform.python_version()}, {platform.machine()}"


def peak_rss_kib() -> int:
    """This process's peak RSS (VmHWM), which unlike ``ru_maxrss`` starts afresh at exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def fast_path_peak_rss(log: Path) -> int:
    """Peak RSS (KiB) of a fresh process that decodes the whole segment with the fast path."""
    code = (
        "import mmap, sys\n"
        "from txn_audit.formats.fast_headers import iter_header_chunks\n"
        "f = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
        "n = sum(len(c.columns) for c in iter_header_chunks(m))\n"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segment-mb", type=int, default=1024, help="segment size in MiB (default 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per decoder; the best counts (default 3)")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "txn-audit-bench")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this CPU (default: the first allowed)")
    parser.add_argument("--skip-slow", action="store_true", help="only the fast path and the raw read")
    args = parser.parse_args(argv)

    if hasattr(os, "sched_setaffinity"):
        cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
    log = segment_path(args.data_dir, args.segment_mb)
    size = log.stat().st_size
    run_raw_read(log)  # into the page cache

    with open(log, "rb") as handle:
        buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        fast_headers.decode_headers(buf, end=1 << 20)  # load the compiled kernels once
        whole = fast_headers.decode_headers(buf)
        batches = len(whole.columns)
        mean = float(whole.columns.size_bytes.mean())
        data_mean = float(whole.columns.size_bytes[~whole.columns.is_control].mean())
        del whole
        load_before = os.getloadavg()
        rows: list[tuple[str, float, int]] = []
        cases: list[tuple[str, Callable[[], int]]] = [
            ("txn-audit fast_headers (numba walk + crc32c, columns)", lambda: run_fast(buf)),
        ]
        if not args.skip_slow:
            cases += [
                ("kafka-python MemoryRecords + validate_crc()", lambda: run_kafka_python(buf)),
                ("bare Python struct walk + crc32c", lambda: run_struct_crc(buf)),
                ("bare Python struct walk, no CRC", lambda: run_struct_no_crc(buf)),
                ("txn-audit reference walk (formats.segment)", lambda: run_reference(buf)),
            ]
        for name, fn in cases:
            seconds, n = best_of(args.repeat, fn)
            assert n == batches, (name, n, batches)
            rows.append((name, seconds, n))
        seconds, n = best_of(args.repeat, lambda: run_raw_read(log))
        assert n == size
        rows.append(("raw read of the same bytes (readinto, page cache)", seconds, batches))
        load_after = os.getloadavg()
        buf.close()

    own_rss_kib = peak_rss_kib()
    rss_kib = fast_path_peak_rss(log)
    kafka = next((s for name, s, _ in rows if name.startswith("kafka-python")), None)
    print(f"machine: {machine()}")
    print(f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"segment: {size / (1 << 20):.0f} MiB, {batches:,} batches, mean {mean:.0f} bytes "
          f"(data batches {data_mean:.0f} bytes, markers 78); best of {args.repeat}, one core")
    print(f"CRC-32C: {fast_headers.crc_implementation()}")
    print()
    print("| decoder | seconds | M batches/s | MB/s | vs kafka-python |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, s, n in rows:
        ratio = f"{kafka / s:.1f}x" if kafka else "n/a"
        print(f"| {name} | {s:.3f} | {n / s / 1e6:.2f} | {size / s / 1e6:.0f} | {ratio} |")
    print()
    print(f"fast path over the whole segment in a fresh process: peak RSS {rss_kib / 1024:.0f} MiB "
          f"(includes the {size / (1 << 20):.0f} MiB of mapped file pages it touched)")
    print(f"this benchmark process: peak RSS {own_rss_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
