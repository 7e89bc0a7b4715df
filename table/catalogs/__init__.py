"""Paimon catalogs paimond reads a warehouse's tables from, beside the filesystem layout
(``table.catalog``): the Hive metastore (:mod:`.hive`, over :mod:`.thrift_codec`), the JDBC
catalog (:mod:`.jdbc`), the REST catalog (:mod:`.rest`) and the storage that commits each
snapshot the catalog's way (:mod:`.catalog_storage`)."""
