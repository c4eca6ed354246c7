"""Loading: from the paths given to ``analyze`` to one Evidence.

``loader.load_paths`` walks files, folders, dumps (``dump_reader``), node summaries
(``analyzer.summaries``), archives (``archive``) and ticket archives (``ticket_format``),
sends each file to its parser, merges what the parsers found per process (``merge``,
``job_merge``, ``hydrate``) and redacts the result (``redaction``).
"""
