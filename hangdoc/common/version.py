"""hangdoc's version, in a module of its own: dumps, summaries and reports record it, and
importing it must not import the package's API (``hangdoc/__init__.py``)."""

__version__ = "0.1.0"
