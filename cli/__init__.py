"""The command line: one parser, every command, one exit-code convention, reports."""
