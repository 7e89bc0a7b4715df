"""Paimon's binary rows, arrays and maps, and the key orders and hashes Java computes on them."""
