"""Spark: the only code that imports pyspark (the ``[spark]`` extra). ``maintain`` runs a
table's maintenance from a PySpark driver; the executor runs compaction's bucket tasks as Spark
tasks."""

from paimond.spark.maintain import MaintenanceFailedError, MaintenanceSummary, maintain

__all__ = ["MaintenanceFailedError", "MaintenanceSummary", "maintain"]
