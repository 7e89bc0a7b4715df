"""Data files as Arrow: formats, key-value layout, statistics, external paths."""
