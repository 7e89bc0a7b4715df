"""The daemon's HTTP port: its endpoints, the bounded server, the status views and what
operators ask of the daemon (control)."""
