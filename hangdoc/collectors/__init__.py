"""What runs on the stuck node: discovery, /proc, py-spy, the dump writer.

Never imports ``hangdoc.analyzer`` or ``hangdoc.rules``: a collector must work on a
node where only the bare package is installed, and must never be slowed by them.
"""
