"""A Spark executor whose tasks each fail once after doing their work: a task lost after its
writes or deletes, before Spark got its result. Spark runs it again
(``spark.task.maxFailures``), and the job must end exactly as if nothing had failed, with
nothing the lost attempt wrote left behind."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paimond.spark.executor import SparkExecutor


def _failing_first_attempt(function: Callable[..., Any], flag_dir: str) -> Callable[..., Any]:
    """``function``, raising after its first attempt's work; each attempt leaves a flag
    ``<stage>.<task>.<attempt>``. A closure, so Spark pickles it by value (executors cannot
    import the tests)."""

    def run(*args: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "runs in a Spark task"
        result = function(*args)
        attempt = context.attemptNumber()
        flag = f"{context.stageId()}.{context.partitionId()}.{attempt}"
        open(os.path.join(flag_dir, flag), "x").close()
        if attempt == 0:
            raise RuntimeError("injected loss of a task after its work")
        return result

    return run


@dataclass
class FailingFirstAttempts:
    """The Spark executor with every ``map_tasks`` task and every shuffle's consuming task
    failing once, after its work (bucket compaction's own retries are tested apart)."""

    inner: SparkExecutor
    flag_dir: str

    def execute(self, tasks: Any, runner: Any, progress: Any) -> Any:
        return self.inner.execute(tasks, runner, progress)

    def map_tasks(self, function: Callable[[Any], Any], items: Sequence[Any],
                  description: str) -> list[Any]:
        return self.inner.map_tasks(_failing_first_attempt(function, self.flag_dir), items,
                                    description)

    def shuffle_tasks(self, produce: Callable[[Any], Any], items: Sequence[Any],
                      consume: Callable[[Any, Iterator[bytes]], Any],
                      destinations: Sequence[Any], description: str) -> list[Any]:
        return self.inner.shuffle_tasks(produce, items,
                                        _failing_first_attempt(consume, self.flag_dir),
                                        destinations, description)

    def retried(self) -> int:
        """How many tasks failed once and then succeeded (every one that failed did)."""
        flags = [name.rsplit(".", 1) for name in os.listdir(self.flag_dir)]
        first = {task for task, attempt in flags if attempt == "0"}
        second = {task for task, attempt in flags if attempt == "1"}
        assert first == second, (first, second)
        return len(first)


def failing_first_attempts(spark: Any, scratch: Path) -> FailingFirstAttempts:
    scratch.mkdir(parents=True, exist_ok=True)
    return FailingFirstAttempts(SparkExecutor(spark), str(scratch))
