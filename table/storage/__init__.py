"""Bytes on storage: the Storage interface, its local and fsspec implementations, temp files."""
