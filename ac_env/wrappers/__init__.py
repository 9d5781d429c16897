"""Environments built on ``AutoCompact-SWE-v0`` (``timing``: when to compact, for SB3)."""
