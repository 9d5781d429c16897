"""AutoCompact training: model loading, Judge-corrected collection, segments, SFT and GRPO.

Needs the ``train`` extra (torch, transformers, trl).
"""
