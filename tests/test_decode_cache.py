import pytest
import torch
from transformers import Qwen3Config
from transformers.cache_utils import DynamicCache, DynamicLayer

from ac_train.models.checkpoints import tiny_model_and_tokenizer
from ac_train.models.decode_cache import ReservedLayer, reserved_cache


@pytest.fixture(scope="module")
def tiny():
    return tiny_model_and_tokenizer()


def decode(model, cache, prompt, steps, stop_after=2):
    """Prefill ``prompt``, repeat it into 3 samples, feed fixed tokens; after
    ``stop_after`` steps the middle row leaves the batch. The logits of every step."""
    seen = []
    with torch.no_grad():
        out = model(input_ids=prompt, cache=cache, use_cache=True)
        seen.append(out.logits[:, -1])
        cache.batch_repeat_interleave(3)
        running = [0, 1, 2]
        for step in range(steps):
            if step == stop_after:
                running = [0, 2]
                cache.batch_select_indices(torch.tensor(running))
            tokens = torch.tensor([[100 + 7 * row + step] for row in running])
            out = model(input_ids=tokens, cache=cache, use_cache=True)
            seen.append(out.logits[:, -1])
    return seen


def test_a_reserved_cache_decodes_exactly_as_the_growing_one(tiny):
    model, _ = tiny
    prompt = torch.arange(5, 45)[None]
    growing = decode(model, DynamicCache(config=model.config), prompt, steps=6)
    cache = reserved_cache(model.config, capacity=40 + 6)
    reserved = decode(model, cache, prompt, steps=6)
    assert all(isinstance(layer, ReservedLayer) for layer in cache.layers)
    assert cache.get_seq_length() == 46
    for want, got in zip(growing, reserved, strict=True):
        assert want.shape == got.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_reserved_layer_refuses_more_than_its_capacity(tiny):
    model, _ = tiny
    with pytest.raises(ValueError, match="reserved 10 positions; 12 are needed"):
        model(input_ids=torch.arange(5, 17)[None], cache=reserved_cache(model.config, 10))


def test_sliding_window_layers_keep_their_own_cache():
    config = Qwen3Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        vocab_size=64,
        use_sliding_window=True,
        sliding_window=8,
        layer_types=["full_attention", "sliding_attention"],
    )
    full, sliding = reserved_cache(config, 32).layers
    assert isinstance(full, ReservedLayer)
    assert not isinstance(sliding, ReservedLayer) and type(sliding) is not DynamicLayer
