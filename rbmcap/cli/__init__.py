"""The ``rbmcap`` command-line tool: one sub-command module per area of the library."""
