"""autocompact-swe: AutoCompact-SWE-v0 as a verifiers v1 environment (hub id
``autocompact-swe``). The taskset and the harness live in ``ac_env.integrations.verifiers``;
this package is the plugin verifiers and prime-rl import by that id."""

from ac_env.integrations.verifiers import (
    AutoCompactHarness,
    AutoCompactHarnessConfig,
    AutoCompactTaskset,
    AutoCompactTasksetConfig,
    load_environment,
)

__all__ = [
    "AutoCompactHarness",
    "AutoCompactHarnessConfig",
    "AutoCompactTaskset",
    "AutoCompactTasksetConfig",
    "load_environment",
]
