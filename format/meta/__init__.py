"""Metadata files: snapshots, schemas, manifests, manifest lists, index manifests, deletion-vector files."""
