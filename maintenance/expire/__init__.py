"""Expiring what Paimon's options say: snapshots, changelogs, partitions, consumers, orphans."""
