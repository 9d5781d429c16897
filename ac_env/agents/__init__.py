"""Policies that need no torch: ``ReferenceAgent`` (a model-free searching repair agent),
``OpenAIChatPolicy`` (any OpenAI-compatible server), ``GoldPatchPolicy`` (applies the task's
gold patch), and ``rollout`` / ``rollout_many`` to run any ``Policy`` through the env.

``Policy`` and ``PolicyOutput`` are defined with the env (``ac_env.policy``), which accepts
them; they are re-exported here because this is where users look for them.
"""

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.agents.oracle import GoldPatchPolicy
from ac_env.agents.reference import ReferenceAgent
from ac_env.agents.rollout import RolloutJob, rollout, rollout_many
from ac_env.policy import Policy, PolicyOutput

__all__ = [
    "GoldPatchPolicy",
    "OpenAIChatPolicy",
    "Policy",
    "PolicyOutput",
    "ReferenceAgent",
    "RolloutJob",
    "rollout",
    "rollout_many",
]
