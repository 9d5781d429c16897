"""GRPO's rollouts from a llama.cpp server, with the learner's weights sent back after every
update (``ac-train grpo --sampler openai:<model>@<url> --sampler-weights DIR``).

The mechanism is two weight slots. The server is started on two GGUF files, ``DIR/a.gguf`` and
``DIR/b.gguf``, served as ``<model>@a`` and ``<model>@b``
(``python -m ac_train.models.served_sampler serve DIR``); it holds one in memory and loads the
other from its file when a request names it.
Before the rollouts of policy version ``v`` (the optimizer steps taken), the learner's weights
are exported (``ac_train.models.gguf_export``, float32) into the slot the server is not holding, and
the rollouts name that slot: the server loads it fresh, so every output of version ``v`` comes
from exactly those weights, and is stamped ``policy_version=v`` (staleness is counted as in the
asynchronous trainer: versions between generation and use). For vLLM, TRL's ``vllm-serve`` and
its client's weight update are the engine to use instead; they are not wired here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel

from ac_env.agents.http import OpenAIChatPolicy
from ac_env.policy import Policy, PolicyOutput, SamplingConfig
from ac_env.runs.workers import require_token_records
from ac_train.models.gguf_export import export_gguf

SLOTS = ("a", "b")


def parse_sampler(spec: str) -> tuple[str, str]:
    """``openai:<model>@<base url>`` -> ``(model, base url)``; ValueError otherwise."""
    scheme, _, rest = spec.partition(":")
    model, _, url = rest.partition("@")
    if scheme != "openai" or not model or not url.startswith(("http://", "https://")):
        raise ValueError(f"sampler: {spec!r} is not openai:<model>@<base url>")
    return model, url


def slot_paths(directory: Path) -> list[Path]:
    return [directory / f"{slot}.gguf" for slot in SLOTS]


def prepare_slots(directory: Path, initial: Path) -> list[tuple[Path, str]]:
    """Create the slot files that are missing (links to ``initial``, the weights to start the
    server with); the ``(gguf, slot alias suffix)`` pairs to serve."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in slot_paths(directory):
        if not path.exists():
            path.symlink_to(initial.resolve())
    return list(zip(slot_paths(directory), SLOTS, strict=True))


class ServedSampler:
    """The sampler side of GRPO on a llama.cpp server started on ``directory``'s slots."""

    def __init__(self, spec: str, directory: Path, template: Path, tokenizer: Any) -> None:
        self.model, self.url = parse_sampler(spec)
        self.directory = directory
        self.template = template
        self.tokenizer = tokenizer
        self.version: int | None = None
        self._slot = 0  # the server starts holding slot a

    @property
    def alias(self) -> str:
        return f"{self.model}@{SLOTS[self._slot]}"

    def push(self, model: PreTrainedModel, version: int) -> None:
        """Export ``model`` into the slot the server is not holding; later policies name it."""
        idle = 1 - self._slot
        export_gguf(model, self.template, slot_paths(self.directory)[idle])
        self._slot, self.version = idle, version

    def policy(self, sampling: SamplingConfig) -> Policy:
        if self.version is None:
            raise RuntimeError("push the learner's weights before sampling")
        served = OpenAIChatPolicy.served(
            self.url, self.alias, sampling, server="llamacpp", tokenizer=self.tokenizer
        )
        return _Versioned(served, self.version)

    def check(self, sampling: SamplingConfig) -> None:
        """ValueError naming what is missing unless the server gives ids and log-probs."""
        served = OpenAIChatPolicy.served(
            self.url, self.alias, sampling, server="llamacpp", tokenizer=self.tokenizer
        )
        require_token_records(served, f"grpo with sampler openai:{self.model}@{self.url}")


class _Versioned:
    """The served policy, its outputs stamped with the policy version that sampled them."""

    def __init__(self, policy: OpenAIChatPolicy, version: int) -> None:
        self.policy = policy
        self.version = version

    def act(self, observation: Sequence[Mapping[str, str]]) -> PolicyOutput:
        return self.policy.act(observation).model_copy(update={"policy_version": self.version})


def main(argv: Sequence[str] | None = None) -> None:
    """``serve DIR``: the llama.cpp server on ``DIR``'s two slots (created from ``--initial``,
    default SmolLM2's GGUF, when missing), in the foreground."""
    from ac_train.models.checkpoints import smollm2_gguf_path
    from ac_train.models.llamacpp import server_config

    parser = argparse.ArgumentParser(prog="python -m ac_train.models.served_sampler")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--model", default="smollm2", help="the name the trainer requests")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--initial", type=Path, help="GGUF to start from (default: SmolLM2's)")
    args = parser.parse_args(argv)
    slots = prepare_slots(args.directory, args.initial or smollm2_gguf_path())
    config = args.directory / "server.json"
    models = [(path, f"{args.model}@{slot}") for path, slot in slots]
    config.write_text(server_config(models, args.port), encoding="utf-8")
    os.execv(
        sys.executable, [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)]
    )


if __name__ == "__main__":
    main()
