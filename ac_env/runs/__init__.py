"""What every run of many episodes shares (``ac-bench``, its fork, ``ac-train collect``, trainer
adapters):

- ``workers``: the worker registry (``reference``, ``openai:<model>@<url>``, registered schemes
  such as ``hf:``) and ``policy_factory``;
- ``retry``: ``run_episode_with_retries``, the one infrastructure-retry policy;
- ``checks``: the checks a run makes before anything is written (``ConfigurationError``);
- ``run_dir``: ``claim_directory``, a results directory's stored configuration;
- ``failures``: the cells whose every episode failed for infrastructure reasons (exit code 3).
"""
