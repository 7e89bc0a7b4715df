"""Paimon's data types: the type tree, its JSON grammar, Arrow types and Python values."""
