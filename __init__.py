"""paimond: background compaction and maintenance for Apache Paimon tables."""

__version__ = "0.1.0"
