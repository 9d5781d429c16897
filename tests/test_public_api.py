"""The names the README and docs tell users to import are importable from there."""

import gymnasium as gym


def test_package_exports():
    import ac_env
    import ac_env.agents
    import ac_env.bench
    import ac_env.timing

    assert set(ac_env.__all__) >= {"Bash", "Compact", "EnvConfig", "Policy", "PolicyOutput"}
    assert set(ac_env.agents.__all__) >= {
        "GoldPatchPolicy",
        "OpenAIChatPolicy",
        "Policy",
        "PolicyOutput",
        "ReferenceAgent",
        "rollout",
        "rollout_many",
    }
    assert ac_env.agents.PolicyOutput is ac_env.PolicyOutput
    assert set(ac_env.bench.__all__) >= {"BenchConfig", "run_benchmark", "write_report"}
    assert set(ac_env.timing.__all__) >= {"TimingEnv", "COMPACT", "CONTINUE"}
    for module in (ac_env, ac_env.agents, ac_env.bench, ac_env.timing):
        assert all(hasattr(module, name) for name in module.__all__)


def test_gym_ids_point_at_their_envs():
    import ac_env  # noqa: F401  (registers the ids)
    from ac_env.env import AutoCompactSWEEnv
    from ac_env.timing import TimingEnv

    load = gym.envs.registration.load_env_creator
    assert load(gym.spec("AutoCompact-SWE-v0").entry_point) is AutoCompactSWEEnv
    assert load(gym.spec("AutoCompact-Timing-v0").entry_point) is TimingEnv
