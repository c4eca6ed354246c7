"""The node side of ``hangdoc watch``: which processes to watch, the cheap signals that say
whether they move, and the stack samples that confirm a stall (no analyzer here: the
report is made by hangdoc/watch.py through hangdoc/pipeline.py)."""
