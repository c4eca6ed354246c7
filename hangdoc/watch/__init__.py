"""``hangdoc watch``: runs beside an unmodified job and writes the diagnosis while it hangs.

The node side (which processes, the cheap signals, the stack samples that confirm a stall,
the loop) is collectors/watch/; this package is the side that may import the analyzer:
the report of a stall (report.py), ``--on-hang`` (onhang.py), the whole-job watcher of a
Slurm job (slurm.py) and the commands (cli.py). docs/watch.md is the user's guide.
"""
