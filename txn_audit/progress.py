"""Progress display for long Spark work: polls Spark's status tracker from a thread.

On a terminal it shows a rich progress bar of finished tasks; elsewhere (nightly logs) it
stays quiet, and the caller's summary lines are the record of the run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def spark_progress(
    spark: SparkSession, description: str, *, enabled: bool = True, console: Console | None = None
) -> Iterator[None]:
    """Show finished/total tasks of the Spark jobs started inside the block."""
    console = console or Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    group = f"txn-audit-{id(description)}-{threading.get_ident()}"
    spark.sparkContext.setJobGroup(group, description)
    stop = threading.Event()
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    bar = progress.add_task(description, total=None)

    def poll() -> None:
        while not stop.wait(0.25):
            done = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            if total:
                progress.update(bar, completed=done, total=total)

    with progress:
        thread = threading.Thread(target=poll, name="txn-audit-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            # None removes the property (pyspark's stubs only allow a string)
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
