"""Parquet details pyarrow leaves out: INT96 timestamps and footer rewriting."""
