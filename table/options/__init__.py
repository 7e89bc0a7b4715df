"""Table options with Paimon's defaults, typed by concern, and the semantic options paimond decides."""
