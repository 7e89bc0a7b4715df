"""Spark: the only code that imports pyspark (the ``[spark]`` extra). ``maintain`` runs a
table's maintenance from a PySpark driver; ``admission`` asks a running daemon whether a
write-only writer may commit now (back-pressure); the executor runs compaction's bucket tasks
as Spark tasks."""

from paimond.errors import AdmissionTimeoutError, DaemonUnreachableError, MaintenanceFailedError
from paimond.spark.admission import TableAdmission, admission
from paimond.spark.maintain import MaintenanceSummary, maintain

__all__ = ["AdmissionTimeoutError", "DaemonUnreachableError", "MaintenanceFailedError",
           "MaintenanceSummary", "TableAdmission", "admission", "maintain"]
