"""Tags: automatic creation, expiry, and tags by hand."""
