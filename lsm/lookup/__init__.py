"""Finding keys in a bucket's other levels: level-0 and key lookups, their local cache, and the
deletion vectors they mark."""
