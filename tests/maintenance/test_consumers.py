"""Consumer expiration on a pypaimon-written table: consumer files written as Java writes them
(pretty-printed JSON) and as pypaimon's ``ConsumerManager`` writes them, modification times set
with ``os.utime``, a fixed clock. Which consumers go is checked against a model of Java's
``ConsumerManager.expire`` (epoch milliseconds, strict before); snapshot expiration stops at a
live consumer and passes it once the consumer is expired; dry runs change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pypaimon.consumer.consumer_manager import ConsumerManager
from support.consumer_tables import NAME, consumer_path, make_table, set_mtime, write_consumers
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.maintenance.expire.consumers import ConsumerExpireJob, list_consumers
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import Table

HOUR_MS = 3_600_000


def _model_expired(specs: dict[str, tuple[int | None, int]], now_ms: int,
                   expiration_ms: int) -> set[str]:
    """Java: ``(now - expiration).isAfter(modified)``."""
    return {cid for cid, (_, mtime) in specs.items() if now_ms - expiration_ms > mtime}


NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SPECS: dict[str, tuple[int | None, int]] = {
    "a-stale": (2, NOW_MS - 3 * HOUR_MS),
    "b-fresh": (4, NOW_MS - 10 * 60_000),
    "c-boundary": (3, NOW_MS - HOUR_MS),  # exactly at the cut-off: kept
    "d-just-past": (3, NOW_MS - HOUR_MS - 1),  # one millisecond older: expires
    "e-junk": (None, NOW_MS - 2 * HOUR_MS),  # unparsable, old: Java expires it unread
    "f-future": (5, NOW_MS + HOUR_MS),
}


@pytest.fixture
def table(tmp_path: Path) -> Table:
    table = make_table(tmp_path / "wh", {"consumer.expiration-time": "1 h",
                                          "write-only": "true"})
    write_consumers(table, SPECS)
    return table


def test_listing_reads_ids_positions_and_times(table: Table) -> None:
    listed = {c.consumer_id: (c.next_snapshot, c.modified_ms) for c in list_consumers(table)}
    assert listed == SPECS


def test_expiry_deletes_exactly_what_java_would(table: Table) -> None:
    result = ConsumerExpireJob(table, clock=Clock(fixed_ms=NOW_MS)).run()
    expected = _model_expired(SPECS, NOW_MS, HOUR_MS)
    assert expected == {"a-stale", "d-just-past", "e-junk"}  # the model itself, pinned
    assert set(result.deleted) == expected
    remaining = {p.name for p in Path(table.file_path("consumer")).iterdir()}
    assert remaining == {f"consumer-{c}" for c in set(SPECS) - expected}
    # pypaimon agrees on what is left
    manager = ConsumerManager(catalog_for(str(Path(table.path).parents[1])).get_table(NAME)
                              .file_io, table.path)
    assert manager.consumers() == {c: SPECS[c][0] for c in set(SPECS) - expected}
    # a second run finds nothing more
    assert ConsumerExpireJob(table, clock=Clock(fixed_ms=NOW_MS)).run().deleted == ()


def test_dry_run_changes_nothing(table: Table) -> None:
    before = tree(table.path)
    result = ConsumerExpireJob(table, clock=Clock(fixed_ms=NOW_MS), dry_run=True).run()
    assert {c.consumer_id for c in result.plan.expired} == _model_expired(SPECS, NOW_MS, HOUR_MS)
    assert result.deleted == ()
    assert "would expire" in result.describe()
    assert tree(table.path) == before


def test_override_and_unset_option(tmp_path: Path) -> None:
    table = make_table(tmp_path / "wh", {})
    write_consumers(table, SPECS)
    before = tree(table.path)
    job = JOBS["expire_consumers"]
    context = JobContext(Clock(fixed_ms=NOW_MS))
    report = job.run(table, job.settings(), context)
    assert "not set" in report.result.describe()
    assert tree(table.path) == before  # no option, no override: Java expires nothing
    window = 2 * HOUR_MS + 30 * 60_000
    report = job.run(table, job.settings(older_than_ms=window), context)
    assert set(report.result.deleted) == _model_expired(SPECS, NOW_MS, window) == {"a-stale"}


def test_a_consumer_refreshed_after_planning_is_kept(table: Table) -> None:
    job = ConsumerExpireJob(table, clock=Clock(fixed_ms=NOW_MS))
    original = job.plan
    path = consumer_path(table, "a-stale")

    def plan_then_reader_advances():  # type: ignore[no-untyped-def]
        plan = original()
        set_mtime(path, NOW_MS - 1000)
        return plan
    job.plan = plan_then_reader_advances  # type: ignore[method-assign,unused-ignore]
    result = job.run()
    assert "a-stale" not in result.deleted and Path(path).exists()
    assert set(result.deleted) == {"d-just-past", "e-junk"}


def test_snapshot_expiry_passes_a_consumer_once_it_is_expired(tmp_path: Path) -> None:
    table = make_table(tmp_path / "wh", {"consumer.expiration-time": "1 h"})
    now_ms = SYSTEM_CLOCK.wall_ms() + 10 * HOUR_MS  # every snapshot is hours old
    specs: dict[str, tuple[int | None, int]] = {"reader": (2, now_ms - 2 * HOUR_MS)}
    write_consumers(table, specs)
    settings = ExpireSettings(retain_min=1, time_retained_ms=0, max_deletes=100)
    clock = Clock(fixed_ms=now_ms)
    first = ExpireJob(table, clock=clock, settings=settings).run()
    assert table.snapshots.earliest_id() == 2, first  # the consumer holds snapshot 2
    ConsumerExpireJob(table, clock=clock).run()
    assert table.consumers() == {}
    ExpireJob(table, clock=clock, settings=settings).run()
    assert table.snapshots.earliest_id() == table.snapshots.latest_id() == 5


def test_cli(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = str(Path(table.path).parents[1])
    now_ms = SYSTEM_CLOCK.wall_ms()
    set_mtime(consumer_path(table, "a-stale"), now_ms - 3 * 86_400_000)
    for other in set(SPECS) - {"a-stale"}:
        set_mtime(consumer_path(table, other), now_ms)
    before = tree(table.path)
    assert main(["expire-consumers", warehouse, "--table", NAME, "--older-than", "1 d",
                 "--dry-run"]) == 0
    assert "a-stale" in capsys.readouterr().out and tree(table.path) == before
    assert main(["expire-consumers", warehouse, "--table", NAME, "--older-than", "1 d"]) == 0
    assert "a-stale: next snapshot 2" in capsys.readouterr().out
    assert not Path(consumer_path(table, "a-stale")).exists()
    assert len(list(Path(table.file_path("consumer")).iterdir())) == len(SPECS) - 1
    assert main(["expire-consumers", warehouse, "--table", NAME, "--older-than", "soon"]) == 2
