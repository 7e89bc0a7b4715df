"""The ``.row`` data file format: blocks of compact rows, their index and footer."""
