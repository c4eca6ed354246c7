"""Node summaries (``summary.json``, ``hangdoc.summary/2``): one small file per node
instead of its dumps. ``codec`` encodes and decodes their records; ``read`` turns one back
into Evidence for the loader. The writer is ``analyzer/summarize/``.
"""
