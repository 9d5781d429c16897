"""Adapters that train on AutoCompact with other frameworks' trainers (each an optional extra).

``ac_train.integrations.trl``: TRL's ``GRPOTrainer`` through its ``rollout_func``.
"""
