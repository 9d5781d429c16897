"""Adapters that let other trainers' frameworks run AutoCompact episodes. Each module needs its
framework's optional extra (``pip install autocompact[openenv]``, ...); ``import ac_env``
imports none of them."""
