"""Reading many flight recorder files at once: ``bulk`` (worker processes), a step of
loading. One file's parser is ``analyzer/parsers/flight_recorder.py``, which builds its
CollectiveRecords fast with ``analyzer/parsers/fr_record_build.py``.
"""
