"""Helpers shared by the test modules: table builders, the oracles (pypaimon, Java Paimon,
Spark) and the loopback S3 endpoint. tests/ is on sys.path through pytest's ``pythonpath``
setting, so they import as ``support.<module>``; test modules import only from here."""
