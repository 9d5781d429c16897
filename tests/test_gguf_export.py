"""The learner's weights exported as GGUF (for a served sampler) read back as the same model."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from ac_train.models.checkpoints import load_model, smollm2_gguf_path, tiny_model_and_tokenizer
from ac_train.models.gguf_export import export_gguf


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(900)
def test_an_exported_model_loads_back_with_the_same_weights(tmp_path):
    model, _ = load_model("smollm2")
    with torch.no_grad():  # weights no GGUF file has held: a trained learner's
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 1e-3)
    out = export_gguf(model, smollm2_gguf_path(), tmp_path / "learner.gguf")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=out.name, dtype=torch.float32)
    theirs = loaded.state_dict()
    for name, weight in model.state_dict().items():
        assert torch.equal(theirs[name], weight), name


def test_a_model_of_another_architecture_is_refused(tmp_path):
    model, _ = tiny_model_and_tokenizer()
    with pytest.raises(ValueError, match="no weight for|has shape"):
        export_gguf(model, smollm2_gguf_path(), tmp_path / "tiny.gguf")
    assert not (tmp_path / "tiny.gguf").exists()
