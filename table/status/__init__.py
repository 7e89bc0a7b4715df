"""What a table looks like now: its shape, duties and health."""
