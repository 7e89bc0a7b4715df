"""Regenerating what a table misses: deletion vectors and file indexes."""
