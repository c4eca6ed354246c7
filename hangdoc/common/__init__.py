"""The bottom layer: what the collectors and the analyzer both need, defined once.

Reading and writing untrusted files safely (``safe_unpickle``, ``archive``, ``atomic``,
``text``), hiding secrets (``redact``), the rank a file's name gives (``rank_names``) and
the version. Nothing here imports the collectors, the analyzer or the rules, so the
collectors stay light on a node and the analyzer imports collectors only for the dump
formats (pyproject.toml's contracts hold both).
"""
