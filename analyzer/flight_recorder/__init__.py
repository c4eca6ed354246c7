"""Reading many flight recorder files at once: ``bulk`` (worker processes) and
``record_build`` (building CollectiveRecords fast). One file's parser is
``analyzer/parsers/flight_recorder.py``.
"""
