"""A lease costs two PUTs and a HEAD per table run (the HEAD because
storage may have lost our last epoch): acquiring right after our own release checks that our
last epoch is still there and creates the next one without listing first, and lists only every
33rd run or once the moment our next epoch was known free lies 5 minutes back. Still safe:
another replica that took the lease over, a restarted daemon, an expired lease taken over,
racers, storage that lost our epochs; and a forgotten instance cannot create an epoch that
cleanup deleted (old epochs go only once listed 10 minutes ago)."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from paimond.daemon.lease import Leases
from paimond.table.storage.interface import Storage, open_storage

TTL_S = 120.0
COUNTED = ("list_dir", "create_exclusive", "read_bytes", "delete_many", "delete", "exists")


class CountingStorage:
    """A real storage whose calls are counted; ``after_list`` runs after each listing."""

    def __init__(self, inner: Storage) -> None:
        self.inner, self.calls = inner, Counter[str]()
        self.after_list: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in COUNTED:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = attr(*args, **kwargs)
            if name == "list_dir" and self.after_list:
                self.after_list.pop(0)()
            return result
        return counted


def _leases(storage: Any, owner: str, now: list[float]) -> Leases:
    return Leases(storage, storage.root, owner, TTL_S, lambda: now[0])


def _run(leases: Leases, table: str = "db.t") -> bool:
    """One table run of three jobs, as the runner does it."""
    if not leases.acquire(table):
        return False
    for _ in range(3):
        leases.renew(table)
    leases.release(table)
    return True


def _epochs(warehouse: Path, table: str = "db.t") -> list[int]:
    folder = warehouse / "_paimond" / "leases" / table
    return sorted(int(p.name.removeprefix("lease-")) for p in folder.iterdir())


def test_back_to_back_runs_list_once_per_33(tmp_path: Path) -> None:
    storage = CountingStorage(open_storage(str(tmp_path)))
    now = [1000.0]
    leases = _leases(storage, "a", now)
    assert all(_run(leases) for _ in range(66))
    # each acquisition without a LIST first checks (exists) that our last epoch is there
    assert storage.calls == {"list_dir": 2, "create_exclusive": 132, "exists": 64}, \
        storage.calls
    assert _epochs(tmp_path) == list(range(1, 133))  # nothing deleted: none listed long ago


def test_runs_a_minute_apart_list_rarely_and_keep_epoch_files_bounded(tmp_path: Path) -> None:
    storage = CountingStorage(open_storage(str(tmp_path)))
    now = [1000.0]
    leases = _leases(storage, "a", now)
    most = 0
    for _ in range(330):
        assert _run(leases)
        most = max(most, len(_epochs(tmp_path)))
        now[0] += 60
    assert storage.calls["list_dir"] == 10 and storage.calls["create_exclusive"] == 660
    assert storage.calls["read_bytes"] == 0
    assert storage.calls["delete_many"] >= 8, "old epochs are deleted at most listings"
    requests = sum(storage.calls.values()) / 330
    assert requests <= 3.1, requests
    # the epochs of the runs since the last LIST and of the 10 minutes before it, never growing
    assert most <= 2 * 33 + 2 * 10 + 2, most
    assert _epochs(tmp_path)[-1] == 660


def test_a_takeover_after_our_release_is_seen(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    now = [0.0]
    a, b = _leases(storage, "a", now), _leases(storage, "b", now)
    assert _run(a)
    now[0] = 10.0
    assert b.acquire("db.t")
    for _ in range(40):  # b works on in the same minute: its cleanup deletes nothing yet
        b.release("db.t")
        assert b.acquire("db.t")
    now[0] = 20.0
    assert 3 in _epochs(tmp_path), "the epoch b took the lease with is still there"
    assert not a.acquire("db.t") and not a.renew("db.t")
    holder = a.current("db.t")
    assert holder is not None and holder.owner == "b"


def test_a_forgotten_instance_lists_before_taking_a_cleaned_up_epoch(tmp_path: Path) -> None:
    """a released at epoch 2 and then idled; b took the lease (epoch 3), worked for 40 minutes
    and deleted epoch 3 among the old ones. Creating epoch 3 again would succeed: a must list
    first, and then it sees b's live lease."""
    storage = open_storage(str(tmp_path))
    now = [0.0]
    a, b = _leases(storage, "a", now), _leases(storage, "b", now)
    assert _run(a) and _epochs(tmp_path) == [1, 2]
    for minute in range(40):
        now[0] = 10.0 + 60 * minute
        assert _run(b)
    assert 3 not in _epochs(tmp_path), "cleaned up"
    assert b.acquire("db.t")
    now[0] += 5
    assert not a.acquire("db.t")
    holder = a.current("db.t")
    assert holder is not None and holder.owner == "b" and holder.expires_at > now[0]


def test_an_expired_lease_taken_over_is_not_taken_back(tmp_path: Path) -> None:
    storage = CountingStorage(open_storage(str(tmp_path)))
    now = [0.0]
    a, b = _leases(storage, "a", now), _leases(storage, "b", now)
    assert a.acquire("db.t")  # and then a stalls past its TTL
    now[0] = TTL_S + 10
    assert b.acquire("db.t")
    now[0] += 10
    assert not a.acquire("db.t") and not a.renew("db.t")
    a.release("db.t")  # its next epoch is b's: nothing written
    holder = b.current("db.t")
    assert holder is not None and holder.owner == "b" and holder.epoch == 2
    assert b.renew("db.t") and _run(b)


def test_a_restarted_daemon_that_took_our_lease_back_is_seen(tmp_path: Path) -> None:
    """Our lease, recorded as an earlier dead incarnation (a process killed on another node),
    is taken back by a restarted daemon of our replica: this instance, still running, must not
    create the next epoch over it."""
    storage = open_storage(str(tmp_path))
    now = [0.0]
    old = _leases(storage, "a", now)
    assert _run(old) and old.acquire("db.t")
    path = tmp_path / "_paimond" / "leases" / "db.t" / "lease-3"
    raw = json.loads(path.read_text())
    path.write_text(json.dumps(raw | {"incarnation": "killed", "host": "another-node"}))
    restarted = _leases(storage, "a", now)
    assert restarted.acquire("db.t")
    now[0] = 10.0
    old.release("db.t")  # epoch 4 is the restarted daemon's
    assert not old.acquire("db.t")
    holder = old.current("db.t")
    assert holder is not None and holder.incarnation == restarted.incarnation


def test_racers_for_a_released_lease_one_wins(tmp_path: Path) -> None:
    """The releaser (no LIST) against listing racers, in one deterministic interleaving (b lists,
    then a creates the epoch b saw free) and with threads."""
    storage = CountingStorage(open_storage(str(tmp_path)))
    now = [0.0]
    a, b = _leases(storage, "a", now), _leases(storage, "b", now)
    assert _run(a)
    won: list[bool] = []
    storage.after_list.append(lambda: won.append(a.acquire("db.t")))
    assert not b.acquire("db.t") and won == [True]
    a.release("db.t")
    racers = [a] + [_leases(storage, f"r{i}", now) for i in range(7)]
    for _ in range(5):
        wins: list[bool] = []
        threads = [threading.Thread(target=lambda r=r, w=wins: w.append(r.acquire("db.t")))
                   for r in racers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert wins.count(True) == 1
        holder = a.current("db.t")
        assert holder is not None
        next(r for r in racers if r.incarnation == holder.incarnation).release("db.t")


def test_storage_that_lost_our_epochs_sends_us_to_the_listing(tmp_path: Path) -> None:
    """The warehouse comes back emptied (or restored from an older copy) and another replica
    took the lease there: our LIST-free path must not create "our last epoch + 1" beside it.
    It first checks that our last epoch is still there."""
    storage = open_storage(str(tmp_path))
    now = [1000.0]
    a, b = _leases(storage, "a", now), _leases(storage, "b", now)
    assert _run(a)  # a's next acquisition would skip the LIST
    shutil.rmtree(tmp_path / "_paimond" / "leases" / "db.t")  # the storage lost the epochs
    now[0] += 1
    assert b.acquire("db.t")  # b lists, finds nothing, holds epoch 1
    assert not a.acquire("db.t"), "a took a lease b holds"
    assert b.renew("db.t")
    b.release("db.t")
    assert a.acquire("db.t")


def test_a_failed_lease_operation_forgets_the_epochs(tmp_path: Path) -> None:
    storage = CountingStorage(open_storage(str(tmp_path)))
    now = [1000.0]
    a = _leases(storage, "a", now)
    assert _run(a)
    (tmp_path / "_paimond").rename(tmp_path / "gone")
    (tmp_path / "_paimond").write_text("not a directory")  # every lease operation fails
    with pytest.raises(OSError):
        a.acquire("db.t")
    (tmp_path / "_paimond").unlink()
    (tmp_path / "gone").rename(tmp_path / "_paimond")
    lists = storage.calls["list_dir"]
    assert a.acquire("db.t") and storage.calls["list_dir"] == lists + 1  # it listed
