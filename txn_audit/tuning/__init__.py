"""The engine's tuning, in one place: what txn-audit sets in Spark, its JVM, its Python workers and its
own imports for speed, and the local JVM's memory. None of it changes a result; the settings are
tested to reach the JVM or the workers as given (``tests/test_spark.py``), interpreted and generated
SQL against each other (``tests/audit/test_scan_modes.py``). ``spark.build_session`` and ``api``
take them from here.

* ``jvm``: the local JVM (not under spark-submit): its memory, heap and Spark's memory pages, its
  compilers and collector by input size, its class archive.
* ``sql``: Spark SQL settings of every session, and interpreted expressions for a small input
  (``sized_for``).
* ``workers``: settings of the Python workers, and which daemon the local sessions start them through.
* ``daemon``: that daemon, which Spark runs by name (``workers.LOCAL_DAEMON_MODULE``).
* ``imports``: Great Expectations imported with the modules it never needs deferred, and the
  imports a scan needs last started on a thread while the JVM starts.

This module imports none of them: Spark runs the daemon by its name, which imports this package first.

Every setting, one a line: what it does; the measurement behind it, ``a vs b`` with the setting
against without ("healthy": the 2.2 MB ``realcorpus/healthy`` dump; "1 GiB", "4 GiB": the benchmark
dumps of ``docs/performance.md``; the runs are in ``git log -- docs/performance.md txn_audit``).

jvm.LOCAL_MEMORY_SHARE, LOCAL_MEMORY_MIB: driver memory a 4th of RAM (cgroup limit), 1-16 GiB: not measured.
jvm.QUICK_JIT_OPTIONS (-XX:TieredStopAtLevel=1) to QUICK_JIT_MAX_BYTES (8 GiB): C1 alone; 4 GiB 55.7 vs 65.4 s.
jvm.QUICK_JIT_OPTIONS (-XX:ReservedCodeCacheSize=240m): C1's own 48 MB filled on a GiB; timing not measured.
jvm.LOCAL_JVM_OPTIONS (-XX:Tier4*) over 8 GiB: C2 at 10x; 4 GiB vs 30x 61-66 vs 67-77 s; >8 GiB not measured.
jvm.*_JIT_OPTIONS (-XX:+UseParallelGC): throughput collector; vs G1, 1 GiB CPU 95-96 vs 100-109 s.
jvm.*_JIT_OPTIONS (-XX:+IgnoreUnrecognizedVMOptions): a JVM without an option ignores it: not measured.
jvm.local_heap_options (-Xms = driver memory): heap whole at start; full GCs at 1 GiB 0 vs 5.
jvm.METASPACE_OPTION (-XX:MetaspaceSize=256m): with -Xms; healthy GC pauses 0.4-0.5 vs 0.6-0.9 s.
jvm.LOCAL_HEAP_PAGES (spark.buffer.pageSize = heap/4096): 1 GiB JVM system CPU 1.6-1.8 vs 2.9-3.2 s.
jvm.class_archive_options (CDS, TXN_AUDIT_CLASS_ARCHIVE): classes mapped; healthy 23.4-24.1 vs 26.5-27.7 s.
jvm.CLASS_ARCHIVE_QUIET (-Xshare:auto, CDS logs off): an unusable archive ignored, silently: not measured.
jvm.CLASS_ARCHIVE_WAIT_S (180 s): the wait at exit for the JVM writing the archive: not measured.
jvm.CLASS_ARCHIVE_STALE_S (3600 s): age at which an archive a dead process left is removed: not measured.
jvm.CLASS_ARCHIVES_KEPT (3): archives kept, one per java and Spark in use: not measured.
sql.SHUFFLE_PARTITIONS (8): spark.sql.shuffle.partitions; 16 or 32 were 1-3 s slower at 4 GiB.
sql.SESSION_SQL (arrow.pyspark.enabled=true): Arrow for pandas conversions: not measured.
sql.SESSION_SQL (dataFrameDebugging.enabled=false): detection's JVM calls 7,588 vs 17,343, its time the same.
sql.SESSION_SQL (codegen.useIdInClassName=false): 338 vs 367 classes compiled at 1 GiB; -0.26 s paired.
sql.INTERPRETED_SQL, to INTERPRETED_MAX_BYTES (64 MiB, sized_for): no codegen; healthy about 3 s faster.
workers.WORKER_SETTINGS (arrow.maxBytesPerBatch=2**31-1): ordered pass at 1 GiB 6.5-7.6 vs 8.4-9.2 s.
workers.LOCAL_DAEMON_MODULE (daemon, archives off the path): workers' CPU at 1 GiB 11 vs 50 s.
daemon.frozen_after_each_task: gc.freeze after a task; workers' CPU at 1 GiB 17.2 vs 22.7 s.
imports.DEFERRED_MODULES (scipy.stats, altair): run on first use; GX import CPU 2.2-2.7 vs 3.2-3.5 s.
imports.import_early: GX and the report on a thread while the JVM starts; healthy 19.7 vs 22.2 s (single scans).
imports.import_early (gc.disable, gc.freeze): full collections on healthy 0.2 vs 1.1-1.2 s.
imports.import_great_expectations (GX_ANALYTICS_ENABLED=false): no usage analytics sent, not for speed: not measured.
"""
