"""The served sampler's weight slots, without a server: which file each push writes, which
alias the rollouts then name, and the version every output carries."""

import pytest

import ac_train.models.served_sampler as served_sampler
from ac_env.policy import SamplingConfig
from ac_train.grpo.config import GRPOConfig
from ac_train.models.served_sampler import ServedSampler, parse_sampler, prepare_slots, slot_paths


def test_pushes_alternate_slots_and_rollouts_name_the_one_just_written(tmp_path, monkeypatch):
    template = tmp_path / "start.gguf"
    template.write_bytes(b"start")
    prepare_slots(tmp_path / "slots", template)
    assert all(
        p.is_symlink() and p.read_bytes() == b"start" for p in slot_paths(tmp_path / "slots")
    )
    written = []
    monkeypatch.setattr(
        served_sampler, "export_gguf", lambda model, tpl, out: written.append(out.name)
    )
    sampler = ServedSampler(
        "openai:smollm2@http://127.0.0.1:9/v1", tmp_path / "slots", template, None
    )
    with pytest.raises(RuntimeError, match="push"):
        sampler.policy(SamplingConfig())
    sampler.push(object(), 0)
    assert (written, sampler.alias, sampler.version) == (["b.gguf"], "smollm2@b", 0)
    sampler.push(object(), 1)
    assert (written, sampler.alias, sampler.version) == (["b.gguf", "a.gguf"], "smollm2@a", 1)
    policy = sampler.policy(SamplingConfig(temperature=1.0))
    assert policy.version == 1 and policy.policy.model == "smollm2@a"
    with pytest.raises(ValueError, match="stop_after_action: in-process sampling only"):
        sampler.policy(SamplingConfig(stop_after_action=True))


def test_a_sampler_needs_its_weight_slots_and_a_valid_spec(tmp_path):
    with pytest.raises(ValueError, match="sampler and sampler_weights go together"):
        GRPOConfig(output_dir=tmp_path, sampler="openai:m@http://127.0.0.1:8080/v1")
    with pytest.raises(ValueError, match="is not openai:<model>@<base url>"):
        GRPOConfig(output_dir=tmp_path, sampler="hf:smollm2", sampler_weights=tmp_path)
    assert parse_sampler("openai:m@http://h:1/v1") == ("m", "http://h:1/v1")
