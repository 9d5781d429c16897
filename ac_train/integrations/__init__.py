"""Adapters that train on AutoCompact with other frameworks' trainers (each an optional extra).

``ac_train.integrations.trl``: TRL's ``GRPOTrainer`` through its ``rollout_func``.
``ac_train.integrations.verl_agent_loop``: verl's agent loop, one output per compaction segment.
``ac_train.integrations.art_rollout``: ART's rollout, one history per compaction segment.
"""
