"""Paimon catalogs paimond reads a warehouse's tables from, beside the filesystem layout
(``table.catalog``): the JDBC catalog (:mod:`.jdbc`) and the storage that commits under a
catalog's lock (:mod:`.locked_storage`)."""
