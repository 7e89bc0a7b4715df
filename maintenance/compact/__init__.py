"""The compact job: planning (LSM, append, clustering, sort) and running compactions."""
