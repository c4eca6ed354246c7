"""hangdoc: which rank is where, and why the distributed PyTorch job is stuck."""

from __future__ import annotations

__version__ = "0.1.0"
