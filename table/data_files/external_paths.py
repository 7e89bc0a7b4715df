"""External data paths (``data-file.external-paths``): Java ``ExternalPathProvider`` and its
round-robin, weighted and entropy-inject providers, ``AbstractFileStore.createExternalPaths``
and ``FileStorePathFactory.relativeBucketPath`` (apache/paimon 5dacde516b).

With a strategy other than ``none``, new data files go to one of the external roots (for
``specific-fs`` only those whose scheme is ``data-file.external-paths.specific-fs``) under the
bucket's path relative to the table (``[data-file.path-directory/]<k=v/...>/bucket-<n>``), and
the file's ``externalPath`` holds the full path as Java's ``Path.toString`` writes it
(``file:/x/...``, ``s3://bucket/...``). Round-robin starts at a random root and moves one root
per file; weighted draws a root in proportion to ``data-file.external-paths.weights`` (fewer
than two roots or no weights: round-robin); entropy-inject adds four directory levels taken
from the Murmur3 hash of the file name.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from paimond.errors import UnsupportedError
from paimond.table.options.core import TableOptions

STRATEGIES = ("none", "round-robin", "specific-fs", "entropy-inject", "weighted")


def java_path(text: str) -> str:
    """``text`` as Java's ``new Path(text).toString()``: scheme kept, empty authority dropped
    (``file:///x`` -> ``file:/x``), repeated and trailing slashes removed."""
    parts = urlsplit(text.strip())
    if not parts.scheme:
        raise UnsupportedError(f"data-file.external-paths: scheme should not be null: {text}")
    path = re.sub("/+", "/", parts.path).rstrip("/")
    if parts.netloc:
        return f"{parts.scheme}://{parts.netloc}{path}"
    return f"{parts.scheme}:{path or '/'}"


@dataclass(frozen=True, slots=True)
class ExternalPaths:
    roots: tuple[str, ...]  # Java Path strings, in option order
    strategy: str
    weights: tuple[int, ...] | None

    @classmethod
    def of(cls, options: TableOptions) -> ExternalPaths | None:
        """None when new files stay under the table (no paths, or strategy ``none``)."""
        text = options.text("data-file.external-paths")
        strategy = (options.text("data-file.external-paths.strategy") or "none").lower()
        if strategy not in STRATEGIES:
            raise UnsupportedError(f"data-file.external-paths.strategy={strategy}")
        if not text or strategy == "none":
            return None
        roots = [java_path(p) for p in text.split(",")]
        if strategy == "specific-fs":
            fs = options.text("data-file.external-paths.specific-fs")
            if fs is None:
                raise UnsupportedError("data-file.external-paths.specific-fs is needed by "
                                       "strategy specific-fs")
            roots = [r for r in roots if r.split(":", 1)[0].lower() == fs.lower()]
        if not roots:
            raise UnsupportedError("data-file.external-paths: no path left for the strategy")
        weights_text = options.text("data-file.external-paths.weights")
        weights = (tuple(int(w) for w in weights_text.split(","))
                   if weights_text and strategy == "weighted" else None)
        if weights is not None and (len(weights) != len(roots) or min(weights) <= 0):
            raise UnsupportedError("data-file.external-paths.weights: one positive integer "
                                   "per external path")
        return cls(tuple(roots), strategy, weights)

    def provider(self, relative_bucket_path: str, rng: random.Random | None = None
                 ) -> ExternalPathProvider:
        return ExternalPathProvider(self, relative_bucket_path.strip("/"), rng or random.Random())


def external_provider(options: TableOptions, table_path: str, directory: str
                      ) -> ExternalPathProvider | None:
    """The provider of the bucket at ``directory`` (a path under ``table_path``), or None."""
    paths = ExternalPaths.of(options)
    if paths is None:
        return None
    if not directory.startswith(table_path.rstrip("/") + "/"):
        raise ValueError(f"{directory} is not under {table_path}")
    return paths.provider(directory[len(table_path.rstrip("/")):])


class ExternalPathProvider:
    """The path of each new data file of one bucket, in the order the files are written."""

    def __init__(self, paths: ExternalPaths, relative: str, rng: random.Random) -> None:
        self._paths, self._relative, self._rng = paths, relative, rng
        self._weighted = paths.strategy == "weighted" and paths.weights is not None \
            and len(paths.roots) >= 2
        self._entropy = paths.strategy == "entropy-inject"
        # round-robin starts at a random root; entropy-inject at the first (Java field default)
        self._position = 0 if self._entropy else rng.randrange(len(paths.roots))

    def next_path(self, file_name: str) -> str:
        roots = self._paths.roots
        if self._weighted:
            root = _weighted_choice(roots, self._paths.weights or (), self._rng.random())
        else:
            self._position = (self._position + 1) % len(roots)
            root = roots[self._position]
        name = f"{entropy_dirs(file_name)}/{file_name}" if self._entropy else file_name
        return "/".join(p for p in (root, self._relative, name) if p)


def _weighted_choice(roots: Sequence[str], weights: Sequence[int], draw: float) -> str:
    """Java's ``higherEntry`` on cumulative weights: the first root whose sum exceeds it."""
    value, total = draw * sum(weights), 0
    for root, weight in zip(roots, weights, strict=True):
        total += weight
        if total > value:
            return root
    return roots[-1]


def entropy_dirs(file_name: str) -> str:
    """Java ``EntropyInjectExternalPathProvider.computeHash``: the low 20 bits of the
    Murmur3-32 hash of the name as binary, cut into ``4/4/4/8`` characters."""
    bits = format(murmur3_32(file_name.encode()) | 0x80000000, "032b")[-20:]
    return f"{bits[0:4]}/{bits[4:8]}/{bits[8:12]}/{bits[12:]}"


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86 32-bit (Guava ``Hashing.murmur3_32``), unsigned."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    full = len(data) - len(data) % 4
    for (k,) in struct.iter_unpack("<I", data[:full]):
        h ^= _mix_k(k, c1, c2)
        h = ((h << 13 | h >> 19) & mask) * 5 + 0xE6546B64 & mask
    tail = data[full:]
    if tail:
        h ^= _mix_k(int.from_bytes(tail, "little"), c1, c2)
    h ^= len(data)
    h ^= h >> 16
    h = h * 0x85EBCA6B & mask
    h ^= h >> 13
    h = h * 0xC2B2AE35 & mask
    return h ^ h >> 16


def _mix_k(k: int, c1: int, c2: int) -> int:
    k = k * c1 & 0xFFFFFFFF
    k = (k << 15 | k >> 17) & 0xFFFFFFFF
    return k * c2 & 0xFFFFFFFF
