"""LSM state machines checked against a dict model (key -> latest value, deduplicate).

``PureLsm`` drives ``Levels`` and the picker over synthetic files (each knows its key ->
(sequence, value or tombstone) entries): flushes add level-0 files, minor and full picks
are applied as merges into the output level, dropping tombstones where ``drop_deletes``
says. Each pick is checked against rules of Java ``UniversalCompaction`` and
``ForceUpLevel0Compaction`` (plain, force-up and gentle mode) stated here independently;
after every step the levels must still be an LSM tree whose reads give the model.

``TableLsm`` does the same on a real local table: pypaimon commits level-0 files, paimond's
``CompactJob`` (minor, with picker states kept across steps, and full) and ``ExpireJob``
maintain it; pypaimon's read, and the first version of each key in paimond's own reads of
the files in LSM order, must equal the model, at the latest and at every retained snapshot.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import tempfile
from collections.abc import Iterable, Sequence

import pyarrow as pa
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, catalog_for, not_null

from paimond.clock import Clock
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.levels import Levels, SortedRun, level0_order
from paimond.lsm.picker import (
    CompactUnit,
    PickerState,
    Trigger,
    drop_deletes,
    pick_full_compaction,
    pick_step,
    pick_universal,
)
from paimond.lsm.rewrite import file_format_of
from paimond.maintenance.compact.job import CompactionSummary, CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.data_files.arrow_io import read_data_file
from paimond.table.options.compaction import CompactionOptions
from paimond.table.scan.snapshot_scan import LiveFile, data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage

Entries = dict[int, tuple[int, int | None]]  # key -> (sequence number, value; None: deleted)

# ---- the pure machine: Levels + picker over synthetic files ------------------------------

_names = itertools.count()
_SIZE_PER_KEY = 100


def _meta(level: int, entries: Entries) -> DataFileMeta:
    sequences = [seq for seq, _ in entries.values()]
    return DataFileMeta(
        file_name=f"data-{next(_names)}.parquet", file_size=_SIZE_PER_KEY * len(entries),
        row_count=len(entries), min_key=b"", max_key=b"", key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS, min_sequence_number=min(sequences),
        max_sequence_number=max(sequences), schema_id=0, level=level, extra_files=(),
        creation_time_millis=0, delete_row_count=0, embedded_index=None, file_source=0,
        value_stats_cols=None, external_path=None, first_row_id=None, write_cols=None,
        write_cols_sequences=None)


def _prefix_length(runs: Sequence[SortedRun], picked: Iterable[DataFileMeta]) -> int:
    """How many newest runs the picked files are exactly (fails if they are no prefix)."""
    names = {f.file_name for f in picked}
    for count in range(len(runs) + 1):
        if {f.file_name for run in runs[:count] for f in run.files} == names:
            return count
    raise AssertionError(f"picked files {sorted(names)} are not a newest prefix of the runs")


def _size_amp_fires(runs: Sequence[SortedRun], options: CompactionOptions) -> bool:
    """Universal rule 1: with at least ``trigger`` runs, the newer runs together exceed
    ``max-size-amplification-percent`` of the oldest."""
    if len(runs) < options.num_sorted_run_trigger:
        return False
    newer = sum(r.size_bytes for r in runs[:-1])
    return newer * 100 > options.max_size_amp_percent * runs[-1].size_bytes


class PureLsm(RuleBasedStateMachine):
    """One bucket, no I/O. Sizes are ``_SIZE_PER_KEY`` per entry, so merges shrink files."""

    @initialize(trigger=st.integers(2, 5), num_levels=st.integers(2, 6),
                amp=st.sampled_from([25, 100, 200, 10**6]), ratio=st.integers(0, 30),
                mode=st.sampled_from(["universal", "force-up", "gentle"]),
                interval=st.integers(1, 4))
    def start(self, trigger: int, num_levels: int, amp: int, ratio: int, mode: str,
              interval: int) -> None:
        self.options = CompactionOptions(
            num_sorted_run_trigger=trigger, max_size_amp_percent=amp, size_ratio=ratio,
            num_levels=num_levels, force_up_level0=mode == "force-up",
            needs_lookup=mode == "gentle",
            lookup_compact_max_interval=interval if mode == "gentle" else None)
        self.mode, self.interval = mode, interval
        self.files: dict[str, tuple[DataFileMeta, Entries]] = {}
        self.model: dict[int, int] = {}
        self.sequence = 0
        self.state = PickerState()
        self.attempts = 0  # gentle mode, counted here: empty universal picks since the last force

    # -- helpers

    def levels(self) -> Levels:
        return Levels.from_files([m for m, _ in self.files.values()], self.options.num_levels,
                                 lambda m: min(self.files[m.file_name][1]))

    def read_order(self) -> list[Entries]:
        """The files as a reader consults them: level 0 newest first, then level 1, 2, ..."""
        levels = self.levels()
        return [self.files[m.file_name][1]
                for level in range(levels.num_levels) for m in levels.files_at(level)]

    def apply(self, unit: CompactUnit, levels: Levels) -> None:
        """Merge the unit's files (newest version of each key) into files at its output level."""
        merged: Entries = {}
        for meta in unit.files:
            for key, (seq, value) in self.files[meta.file_name][1].items():
                if key not in merged or merged[key][0] < seq:
                    merged[key] = (seq, value)
        if drop_deletes(unit.output_level, levels.non_empty_highest_level(), dv_enabled=False):
            merged = {k: v for k, v in merged.items() if v[1] is not None}
        for meta in unit.files:
            del self.files[meta.file_name]
        keys = sorted(merged)
        for start in range(0, len(keys), 3):  # rolling output: three keys per file
            entries = {k: merged[k] for k in keys[start:start + 3]}
            meta = _meta(unit.output_level, entries)
            self.files[meta.file_name] = (meta, entries)

    # -- rules

    @rule(batch=st.lists(st.tuples(st.integers(0, 40), st.none() | st.integers(0, 999)),
                         min_size=1, max_size=10))
    def flush(self, batch: list[tuple[int, int | None]]) -> None:
        entries: Entries = {}
        for key, value in batch:  # the write buffer keeps the last version of a key
            self.sequence += 1
            entries[key] = (self.sequence, value)
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value
        meta = _meta(0, entries)
        self.files[meta.file_name] = (meta, entries)

    @rule()
    def compact(self) -> None:
        levels = self.levels()
        runs = levels.sorted_runs()
        options, trigger = self.options, self.options.num_sorted_run_trigger
        universal = pick_universal(runs, levels.num_levels, options, self.state)
        unit, after = pick_step(runs, levels.num_levels, options, self.state)
        level0_runs = len(levels.level0)

        # Force-up and gentle modes only act when universal picks nothing.
        forced_due = False
        if self.mode != "universal" and universal is None:
            forced_due = True
            if self.mode == "gentle":
                self.attempts += 1
                forced_due = self.attempts == self.interval
                if forced_due:
                    self.attempts = 0
        assert after.force_l0_attempts == (self.attempts if self.mode == "gentle" else 0)
        if universal is not None:
            assert unit is not None and unit.files == universal.files
            assert unit.trigger != Trigger.FORCE_L0
        elif forced_due and level0_runs:
            assert unit is not None and unit.trigger == Trigger.FORCE_L0
        else:
            assert unit is None

        if len(runs) < trigger:  # no universal rule fires below the trigger
            assert universal is None
        if len(runs) > trigger:  # above it the run-count rule always picks
            assert universal is not None
        if _size_amp_fires(runs, options):
            assert unit is not None and unit.trigger == Trigger.SIZE_AMP
        self.state = after
        event(f"pick: {unit.trigger.value if unit else None}")
        if unit is None:
            return

        count = _prefix_length(runs, unit.files)
        assert all(f.level <= unit.output_level for f in unit.files), "data never moves down"
        if count == len(runs):
            assert unit.output_level == levels.max_level
        else:
            # A triggered pick absorbs every run of levels 0 and 1, and stops only at a run
            # larger than the ratio allows; its output is the level just below that run.
            rest = runs[count]
            assert rest.level >= 2 and 1 <= unit.output_level == rest.level - 1
            picked = sum(r.size_bytes for r in runs[:count])
            assert picked * (100 + options.size_ratio) / 100.0 < rest.size_bytes
            assert unit.trigger in (Trigger.SIZE_RATIO, Trigger.RUN_COUNT, Trigger.FORCE_L0)
        if unit.trigger == Trigger.SIZE_AMP:
            assert _size_amp_fires(runs, options)
        if unit.trigger != Trigger.FORCE_L0:
            assert count >= 2
        if unit.trigger == Trigger.FORCE_L0:
            assert count >= level0_runs

        self.apply(unit, levels)
        after_runs = self.levels().sorted_runs()
        # The output level was empty or picked: the picked runs become at most one.
        output_files = self.levels().files_at(unit.output_level)
        assert len(after_runs) == len(runs) - count + (1 if output_files else 0)
        assert len(after_runs) < len(runs) if len(runs) > trigger else len(after_runs) <= trigger
        if self.mode == "force-up" or unit.trigger == Trigger.FORCE_L0:
            assert not self.levels().level0

    @rule()
    def full_compact(self) -> None:
        levels = self.levels()
        runs = levels.sorted_runs()
        unit = pick_full_compaction(runs, levels.num_levels, lambda f: False)
        if not runs or (len(runs) == 1 and runs[0].level == levels.max_level):
            assert unit is None
            return
        assert unit is not None and unit.trigger == Trigger.FULL and unit.covers_all_runs
        assert _prefix_length(runs, unit.files) == len(runs)
        assert unit.output_level == levels.max_level
        self.apply(unit, levels)
        after = self.levels().sorted_runs()
        assert len(after) <= 1 and all(r.level == levels.max_level for r in after)
        # Deletes are dropped at the max level: only live keys remain.
        assert all(v is not None for _, es in self.files.values() for _, v in es.values())

    # -- invariants

    @invariant()
    def levels_are_an_lsm_tree(self) -> None:
        levels = self.levels()
        assert levels.num_levels == self.options.num_levels
        for level in range(1, levels.num_levels):
            ranges = [(min(self.files[m.file_name][1]), max(self.files[m.file_name][1]))
                      for m in levels.files_at(level)]
            for (_, high), (low, _) in itertools.pairwise(ranges):
                assert high < low, f"level {level} is not one sorted run: {ranges}"
        # Every key's versions get older along the read order (what makes dropping safe).
        versions: dict[int, list[int]] = {}
        for entries in self.read_order():
            for key, (seq, _) in entries.items():
                versions.setdefault(key, []).append(seq)
        for key, seqs in versions.items():
            assert all(a > b for a, b in itertools.pairwise(seqs)), (key, seqs)

    @invariant()
    def reads_give_the_model(self) -> None:
        found: dict[int, int | None] = {}
        for entries in self.read_order():
            for key, (_, value) in entries.items():
                found.setdefault(key, value)  # the first file that has the key decides
        assert {k: v for k, v in found.items() if v is not None} == self.model


TestPureLsm = PureLsm.TestCase
TestPureLsm.settings = settings(stateful_step_count=50, deadline=None)


# ---- the table machine: pypaimon writes, paimond maintains --------------------------------

NOON = Clock(fixed_ms=1_795_348_800_000)  # 2026-11-22 12:00 UTC
FAR_FUTURE = Clock(fixed_ms=4_102_444_800_000)
_NAME = "db.lsm"
_SCHEMA = pa.schema([not_null("k", pa.int32()), ("v", pa.string()), ("rk", pa.string())])
_RETRACT_KINDS = (1, 3)  # _VALUE_KIND of -U and -D


Batch = list[tuple[int, int | None, int]]  # (key, value or None: delete, value width)
# Values of very different widths (incompressible hex) give files of very different sizes,
# so the size-ratio rule leaves big runs alone and outputs to middle levels.
_BATCHES = st.lists(st.lists(st.tuples(st.integers(0, 7), st.none() | st.integers(0, 99),
                                       st.sampled_from([1, 300, 3000])),
                             min_size=1, max_size=8), min_size=1, max_size=4)


def _value_text(value: int, width: int) -> str:
    blocks = (width + 63) // 64  # a SHA-256 hex digest is 64 characters
    return "".join(hashlib.sha256(f"{value}/{i}".encode()).hexdigest()
                   for i in range(blocks))[:width]


class TableLsm(RuleBasedStateMachine):
    @initialize(trigger=st.integers(2, 3), num_levels=st.integers(3, 4),
                buckets=st.sampled_from([1, 2]), amp=st.sampled_from([50, 400]),
                ratio=st.sampled_from([1, 50]), first=_BATCHES)
    def start(self, trigger: int, num_levels: int, buckets: int, amp: int, ratio: int,
              first: list[Batch]) -> None:
        self.warehouse = tempfile.mkdtemp(prefix="lsm-model-")
        options = {"bucket": str(buckets), "rowkind.field": "rk",
                   "num-sorted-run.compaction-trigger": str(trigger),
                   "num-levels": str(num_levels),
                   "compaction.max-size-amplification-percent": str(amp),
                   "compaction.size-ratio": str(ratio)}
        self.writer = TableWriter(catalog_for(self.warehouse), _NAME, _SCHEMA, primary_keys=("k",),
                              options=options)
        self.table: Table = open_table(open_storage(self.warehouse), self.warehouse, _NAME)
        self.trigger, self.max_level = trigger, num_levels - 1
        self.model: dict[int, str] = {}
        self.history: dict[int, dict[int, str]] = {}  # snapshot id -> the model at it
        self.picker_states: dict[tuple[bytes, int], PickerState] = {}
        self.commit(first)

    def teardown(self) -> None:
        if hasattr(self, "warehouse"):
            shutil.rmtree(self.warehouse, ignore_errors=True)

    # -- helpers

    def latest(self) -> Snapshot | None:
        return self.table.snapshots.latest()

    def buckets(self) -> dict[tuple[bytes, int], list[LiveFile]]:
        latest = self.latest()
        if latest is None:
            return {}
        return {key: b.files for key, b in scan_snapshot(self.table, latest).buckets().items()}

    def run_counts(self) -> dict[tuple[bytes, int], int]:
        return {key: len({f.meta.file_name for f in files if f.meta.level == 0})
                + len({f.meta.level for f in files if f.meta.level > 0})
                for key, files in self.buckets().items()}

    def read_file(self, live: LiveFile) -> pa.Table | None:
        """paimond's own read of a data file: key, sequence, kind and value columns."""
        schema = self.table.latest_schema()
        path = data_file_path(self.table, schema, live)
        batches = list(read_data_file(
            self.table.storage, path, file_format=file_format_of(live.meta.file_name),
            file_schema=self.table.schema(live.meta.schema_id), read_schema=schema,
            key_value=True))
        return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None

    def commit(self, batches: list[Batch]) -> None:
        """One pypaimon commit (a level-0 file in each bucket written to) per batch."""
        for batch in batches:
            before = self.latest()
            rows = []
            for key, value, width in batch:
                if value is None:
                    rows.append({"k": key, "v": None, "rk": "-D"})
                    self.model.pop(key, None)
                    continue
                text = _value_text(value, width)
                rows.append({"k": key, "v": text, "rk": "+U" if key in self.model else "+I"})
                self.model[key] = text
            self.writer.commit(rows)
            latest = self.latest()
            assert latest is not None and latest.id == (before.id + 1 if before else 1)
            assert latest.commit_kind == "APPEND"
            self.history[latest.id] = dict(self.model)

    def compact(self, full: bool) -> CompactionSummary:
        before, runs_before = self.latest(), self.run_counts()
        files_before = {f.meta.file_name: f for fs in self.buckets().values() for f in fs}
        summary = CompactJob(self.table, full=full, parallelism=1, use_processes=False,
                             clock=NOON, picker_states=self.picker_states).run()
        assert not summary.failures
        assert summary.plan is not None
        latest = self.latest()
        for task in summary.plan.tasks:
            below = "max level" if task.output_level == self.max_level else "below max level"
            event(f"{'full' if full else 'minor'} compaction ({task.trigger}) to {below}")
        if not summary.plan.tasks:
            assert summary.snapshot is None and latest == before
            return summary
        assert before is not None and latest is not None and summary.snapshot is not None
        assert latest.id == summary.snapshot.id == before.id + 1
        assert latest.commit_kind == "COMPACT"
        self.history[latest.id] = dict(self.model)
        files_after = {f.meta.file_name: f for fs in self.buckets().values() for f in fs}
        inputs = {e.file.file_name for t in summary.plan.tasks for e in t.inputs}
        # Only inputs leave; every new or upgraded file sits at its task's output level.
        assert set(files_before) - set(files_after) <= inputs
        for task in summary.plan.tasks:
            names = {e.file.file_name for e in task.inputs}
            for live in files_after.values():
                if (live.entry.partition, live.entry.bucket) != (task.partition, task.bucket):
                    continue
                if live.meta.file_name in names or live.meta.file_name not in files_before:
                    assert live.meta.level == task.output_level
        # A pick never adds runs; above the trigger it removes at least one (one pick per
        # bucket and run: a bucket can stay above the trigger, never grow).
        for key, after in self.run_counts().items():
            assert key in runs_before and after <= runs_before[key]
            if not full:
                assert after <= max(self.trigger, runs_before[key] - 1), (runs_before, after)
        return summary

    # -- rules

    @rule(batches=_BATCHES, then_compact=st.booleans())
    def write(self, batches: list[Batch], then_compact: bool) -> None:
        self.commit(batches)
        if then_compact:  # as the daemon does when it sees new commits
            self.compact(full=False)

    @rule()
    def minor_compaction(self) -> None:
        self.compact(full=False)

    @rule()
    def full_compaction(self) -> None:
        self.compact(full=True)
        for files in self.buckets().values():
            assert {f.meta.level for f in files} == {self.max_level}

    @rule(retain=st.integers(1, 3))
    def expire(self, retain: int) -> None:
        ids = self.table.snapshots.list_ids()
        ExpireJob(self.table, clock=FAR_FUTURE,
                  settings=ExpireSettings(retain_min=retain, retain_max=retain,
                                          time_retained_ms=0, max_deletes=1000)).run()
        kept = self.table.snapshots.list_ids()
        event(f"expire: {len(ids) - len(kept)} of {len(ids)} snapshots")
        assert kept == ids[-retain:]
        self.history = {i: m for i, m in self.history.items() if i in kept}
        for snapshot_id in kept[:-1]:  # the latest is checked by the invariants
            rows = read_rows(self.warehouse, _NAME, snapshot_id)
            assert self._live(rows) == self.history[snapshot_id]

    # -- invariants

    @staticmethod
    def _live(rows: pa.Table) -> dict[int, str]:
        # pypaimon returns a lone file's -D rows unmerged (it trusts delete_row_count 0):
        # the retractions are not rows of the table.
        return {r["k"]: r["v"] for r in rows.to_pylist() if r["rk"] not in ("-U", "-D")}

    @invariant()
    def snapshots_are_continuous(self) -> None:
        ids = self.table.snapshots.list_ids()
        assert ids and ids == list(range(ids[0], ids[-1] + 1))
        assert ids == sorted(self.history)

    @invariant()
    def pypaimon_reads_the_model(self) -> None:
        assert self._live(read_rows(self.warehouse, _NAME)) == self.model

    @invariant()
    def files_form_an_lsm_tree_reading_the_model(self) -> None:
        """Each file: sorted unique keys matching its metadata; levels >= 1 one sorted run;
        no deletes at the max level; every key's versions older along the read order; and
        the first version found of each key is the model."""
        key_types = self.table.latest_schema().key_type.field_types
        read: dict[int, str | None] = {}
        for files in self.buckets().values():
            level0 = sorted((f for f in files if f.meta.level == 0),
                            key=lambda f: level0_order(f.meta))
            higher = sorted((f for f in files if f.meta.level > 0),
                            key=lambda f: (f.meta.level, decode_manifest_row(f.meta.min_key,
                                                                             key_types)))
            versions: dict[int, list[int]] = {}
            previous: LiveFile | None = None
            for live in level0 + higher:
                meta = live.meta
                assert meta.level <= self.max_level
                rows = self.read_file(live)
                assert rows is not None and rows.num_rows == meta.row_count
                keys = rows.column("_KEY_k").to_pylist()
                seqs = rows.column("_SEQUENCE_NUMBER").to_pylist()
                kinds = rows.column("_VALUE_KIND").to_pylist()
                values = rows.column("v").to_pylist()
                assert keys == sorted(set(keys)), "a file holds each key once, in order"
                assert (keys[0], keys[-1]) == (decode_manifest_row(meta.min_key, key_types)[0],
                                               decode_manifest_row(meta.max_key, key_types)[0])
                assert meta.min_sequence_number <= min(seqs)
                assert max(seqs) <= meta.max_sequence_number
                if meta.level == self.max_level:
                    assert not set(kinds) & set(_RETRACT_KINDS), "the max level keeps no deletes"
                if previous is not None and meta.level > 0 and previous.meta.level == meta.level:
                    assert decode_manifest_row(previous.meta.max_key, key_types)[0] < keys[0]
                previous = live
                for key, seq, kind, value in zip(keys, seqs, kinds, values, strict=True):
                    versions.setdefault(key, []).append(seq)
                    read.setdefault(key, None if kind in _RETRACT_KINDS else value)
            for key, seqs in versions.items():
                assert all(a > b for a, b in itertools.pairwise(seqs)), (key, seqs)
        assert {k: v for k, v in read.items() if v is not None} == self.model


TestTableLsm = TableLsm.TestCase
TestTableLsm.settings = settings(max_examples=20, stateful_step_count=12, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])
