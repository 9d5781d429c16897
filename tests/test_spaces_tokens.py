import pytest

from ac_env.spaces import Messages, UnicodeText
from ac_env.tokens import ApproxTokenCounter, HFTokenCounter, make_token_counter


def test_unicode_text_accepts_code_and_any_characters():
    space = UnicodeText(max_length=100)
    assert space.contains("```bash\ngrep -rn 'def ' src | head\n```")
    assert space.contains("naïve 中文 😀 \x00")
    assert not space.contains("x" * 101)
    assert not space.contains(b"bytes")
    assert not space.contains(None)


def test_unicode_text_samples_are_members_and_seeded():
    a, b = UnicodeText(seed=3), UnicodeText(seed=3)
    samples = [a.sample() for _ in range(20)]
    assert samples == [b.sample() for _ in range(20)]
    assert all(a.contains(s) for s in samples)
    assert any(any(ord(c) > 127 for c in s) for s in samples)


def test_messages_space():
    space = Messages(seed=1)
    assert space.contains(({"role": "system", "content": "x"}, {"role": "user", "content": ""}))
    assert not space.contains([{"role": "user", "content": "x"}])  # must be a tuple
    assert not space.contains(({"role": "tool", "content": "x"},))
    assert not space.contains(({"role": "user", "content": 3},))
    assert not space.contains(({"role": "user", "content": "x", "extra": 1},))
    for _ in range(10):
        assert space.contains(space.sample())


def test_approx_counter_scales_with_text():
    c = ApproxTokenCounter()
    assert c.count("") == 0
    assert c.count("hello") == 2  # 5 letters: ceil(5/4)
    assert c.count("a b c") == 3
    assert c.count("x = f(1)\n") == 7
    code = "def parse(value):\n    return int(value) + 1\n"
    assert c.count(code * 10) == 10 * c.count(code)
    assert len(code) / c.count(code) == pytest.approx(3, abs=1.5)  # chars per token like BPE


class WordTokenizer:
    """A stand-in with the HF tokenizer interface: one id per whitespace-separated word."""

    name_or_path = "words"
    chat_template = "set"

    def encode(self, text, add_special_tokens=False):
        return list(range(len(text.split())))

    def apply_chat_template(self, messages, tokenize=True):
        words = sum(len(m["content"].split()) for m in messages)
        return list(range(words + 4 * len(messages)))


def test_hf_counter_uses_tokenizer_and_measures_template_overhead():
    c = HFTokenCounter(WordTokenizer())
    assert c.count("one two three") == 3
    assert c.message_overhead("user") == 4
    assert c.name == "hf:words"


def test_make_token_counter():
    assert isinstance(make_token_counter("approx"), ApproxTokenCounter)
    with pytest.raises(ValueError, match="token_counter"):
        make_token_counter("tiktoken")
