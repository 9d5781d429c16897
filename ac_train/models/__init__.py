"""Language models and how they are run: loading checkpoints (``checkpoints``: the offline
SmolLM2 default, any HF path, a tiny test model), generating with one in process
(``policy``: ``TransformersPolicy``; ``decode_cache``, ``batched_acts``), and serving or
sampling through a server (``serve``, ``served_sampler``, ``llamacpp``, ``gguf_export``).
"""

from ac_train.models.checkpoints import (
    SMOLLM2,
    load_model,
    load_tokenizer,
    smollm2_gguf_path,
    tiny_model_and_tokenizer,
)
from ac_train.models.policy import SamplingSettings, TransformersPolicy, hf_worker

__all__ = [
    "SMOLLM2",
    "SamplingSettings",
    "TransformersPolicy",
    "hf_worker",
    "load_model",
    "load_tokenizer",
    "smollm2_gguf_path",
    "tiny_model_and_tokenizer",
]
