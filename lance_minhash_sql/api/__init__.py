"""The public entries that take an executor (``entries.py``)."""
