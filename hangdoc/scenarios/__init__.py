"""Real hung jobs on CPU (gloo) for the demo, the end-to-end tests and the fixtures.

Each scenario is a small training-like program (``job.py``) that really hangs the way
jobs hang in the field; ``launch.py`` starts N ranks of it as separate processes (or
under torchrun) with the usual RANK/WORLD_SIZE environment, and tells when every rank
has reached the point where it blocks (ready markers), so nothing waits on a sleep.
"""
