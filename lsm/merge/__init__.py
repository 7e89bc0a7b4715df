"""Merging a bucket's sorted runs: the streaming merge, its threads, merge engines, changelog,
record expiry."""
