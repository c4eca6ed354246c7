"""The layout of a ticket archive (``hangdoc analyze --archive``) as the loader reads it.

The writer is ``analyzer/ticket.py``; the names live here so that the loader does
not import a renderer.
"""

# Marks the archive's folder; lists what is inside and what was left out.
MARKER = "hangdoc-ticket.json"
# The folder of inputs inside it: the only part ``analyze`` reads back as evidence.
INPUTS = "inputs"
