"""A learner's weights as a GGUF file that llama.cpp serves: the weights reach a served sampler.

``export_gguf(model, template, out)`` writes every tensor of ``template`` (a GGUF of the same
architecture: SmolLM2's own file) from ``model``'s float32 weights, and copies the template's
metadata (hyper-parameters, tokenizer, chat template), so the served model is the learner's
exactly up to llama.cpp's arithmetic. Llama-family models only (llama.cpp stores their query
and key projections with rows reordered for its rotary embedding; they are reordered here).
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import torch
from transformers import PreTrainedModel

_FILE_TYPE_ALL_F32 = 0


def export_gguf(model: PreTrainedModel, template: Path, out: Path) -> Path:
    """Write ``out`` (via a temporary sibling, renamed into place: a reader never sees half a
    file). ValueError naming the tensor when ``model`` lacks one of ``template``'s or holds
    it in another shape."""
    reader = gguf.GGUFReader(template)
    arch_name = str(reader.fields["general.architecture"].contents())
    if arch_name != "llama":
        raise ValueError(f"{template}: architecture {arch_name!r}; only 'llama' is exported")
    config = model.config
    blocks = int(config.num_hidden_layers)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)
    state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
    by_gguf_name = {}
    for hf_name, tensor in state.items():
        mapped = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if mapped is not None:  # with the suffix: token_embd.weight
            by_gguf_name[mapped] = (hf_name, tensor)
    tensors = []
    for tensor in reader.tensors:
        if tensor.name not in by_gguf_name:
            raise ValueError(f"the model has no weight for {template}'s tensor {tensor.name}")
        hf_name, weight = by_gguf_name[tensor.name]
        data = weight.to(torch.float32).numpy()
        if hf_name.endswith("q_proj.weight"):
            data = _rope_rows(data, int(config.num_attention_heads))
        elif hf_name.endswith("k_proj.weight"):
            data = _rope_rows(data, int(config.num_key_value_heads))
        expected = [int(n) for n in reversed(tensor.shape.tolist())]
        if list(data.shape) != expected:
            raise ValueError(
                f"{hf_name} has shape {list(data.shape)}; {template}'s {tensor.name}: {expected}"
            )
        tensors.append((tensor.name, np.ascontiguousarray(data)))
    partial = out.with_name(f".{out.name}.partial")
    writer = gguf.GGUFWriter(partial, arch_name)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = _FILE_TYPE_ALL_F32 if field.name == "general.file_type" else field.contents()
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for name, data in tensors:
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, out)
    return out


def _rope_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's row order of a query/key projection (per head, the two rotary halves
    interleaved), from the Hugging Face order."""
    rows = weight.shape[0]
    return (
        weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )
