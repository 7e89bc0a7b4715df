"""A table's index files on storage: deletion vectors and data-file indexes."""
