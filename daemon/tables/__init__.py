"""The daemon's view of each table: its state, what it needs (evaluate, watch), its policy,
pace and admission."""
