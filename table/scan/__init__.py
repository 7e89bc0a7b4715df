"""A snapshot's live files: whole, bucket by bucket, or window by window of partitions."""
