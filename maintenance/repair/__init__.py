"""Repairs after a storage accident: manifest entries of missing data files, snapshot hints."""
