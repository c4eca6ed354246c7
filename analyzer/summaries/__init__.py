"""Node summaries (``hangdoc job summarize``): one small file per node instead of its dumps.

``write`` builds one from a node's dumps (reducing with ``reduce``, encoding frames with
``codec``); ``read`` turns it back into Evidence for the loader.
"""
