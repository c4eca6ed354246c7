"""Writing a node's summary (``hangdoc job``'s finalizer on each node): its dump loaded as
``analyze`` loads it, reduced (``reduce``) and written (``write``).

Beside loading, above it: it imports the loader to read the dump, and the loader never
imports it. The summary's format and its reader, which the loader uses, are
``analyzer/summaries/``.
"""
