"""Committing a table change: the optimistic commit, its checks, manifests and job records."""
