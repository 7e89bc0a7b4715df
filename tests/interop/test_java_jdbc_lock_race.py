"""Java writers and paimond committing to one table on S3 at the same time, both under a JDBC
catalog's lock (PostgreSQL, ``lock.enabled``): Java Paimon 1.4 (Hadoop's S3A through
paimon-s3, on the loopback S3 endpoint) commits a write while paimond commits a full
compaction, 25 rounds. On S3, Java's commit is "the snapshot file does not exist, then write
it" under the lock; paimond takes the same lock row, so neither can overwrite the other's
snapshot: the ids are contiguous, every Java write and every paimond compaction has its own
snapshot, and Java reads every row written. (Java 1.4: Maven Central serves no paimon-s3 2.x.)
"""

from __future__ import annotations

import re
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.java_maintainer import JavaMaintainer, start_maintainer, unavailable
from support.java_paimon import S3_AND_POSTGRES, JavaUnavailable, fetch_jars
from support.postgres import PASSWORD, Postgres
from support.s3_endpoint import ACCESS_KEY, SECRET_KEY, S3Endpoint

from paimond.cli.main import main
from paimond.format.meta.snapshot import decode_snapshot
from paimond.table.storage.interface import open_storage

ROUNDS = 25
pytestmark = [pytest.mark.crash_campaign, pytest.mark.jvm]


@pytest.fixture(scope="module")
def java_on_s3(tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        maintainer = start_maintainer("1.4", tmp_path_factory.mktemp("java_s3"),
                                      fetch_jars(S3_AND_POSTGRES))
    except JavaUnavailable as e:
        unavailable("Java Paimon 1.4 on S3", e)
    try:
        yield maintainer
    finally:
        maintainer.close()


def test_java_and_paimond_commit_under_one_lock(java_on_s3: JavaMaintainer, postgres: Postgres,
                                                s3_endpoint: S3Endpoint,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: Any) -> None:
    bucket = s3_endpoint.make_bucket(f"paimond-race-{uuid.uuid4().hex[:12]}")
    warehouse = f"{bucket}/wh"
    catalog = {"metastore": "jdbc", "uri": postgres.uri(), "jdbc.user": postgres.user,
               "catalog-key": f"race_{uuid.uuid4().hex[:8]}", "lock.enabled": "true"}
    java = {**catalog, "jdbc.password": PASSWORD, "warehouse": warehouse,
            "s3.endpoint": s3_endpoint.endpoint_url, "s3.access-key": ACCESS_KEY,
            "s3.secret-key": SECRET_KEY, "s3.path.style.access": "true",
            "s3.endpoint.region": s3_endpoint.region}
    assert java_on_s3.catalog_write(java, "db.t", [["+I", -1, "first"]]) == 1
    monkeypatch.setenv("PAIMOND_JDBC_PASSWORD", PASSWORD)
    flags = [*(f"--catalog-option={k}={v}" for k, v in catalog.items()),
             *(f"--storage-option={k}={v}" for k, v in s3_endpoint.storage_options.items())]

    compactions = 0
    for round_ in range(ROUNDS):
        rows = [["+I", 2 * round_, "a"], ["+I", 2 * round_ + 1, "b"]]
        writer = threading.Thread(target=java_on_s3.catalog_write, args=(java, "db.t", rows))
        writer.start()
        assert main(["compact", warehouse, "--table", "db.t", "--full", *flags]) == 0
        writer.join()
        compactions += len(re.findall(r"snapshot \d+ after", capsys.readouterr().out))

    storage = open_storage(warehouse, s3_endpoint.storage_options)
    directory = storage.join(warehouse, "db.db", "t", "snapshot")
    snapshots = [decode_snapshot(storage.read_bytes(f.path))
                 for f in storage.list_dir(directory) if f.name.startswith("snapshot-")]
    kinds = [s.commit_kind for s in sorted(snapshots, key=lambda s: s.id)]
    assert sorted(s.id for s in snapshots) == list(range(1, len(snapshots) + 1))
    assert kinds.count("APPEND") == ROUNDS + 1 and kinds.count("COMPACT") == compactions
    assert compactions >= ROUNDS // 2  # paimond did race: most rounds found runs to merge
    assert java_on_s3.catalog_count(java, "db.t") == 2 * ROUNDS + 1
    assert not Path(warehouse).exists()  # nothing went to a local path by mistake
