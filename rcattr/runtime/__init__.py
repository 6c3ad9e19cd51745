"""The model runtime: loading models (models), routing a model's attention through rcattr's hooks (attention),
capturing raw logits beside the kernel (capture), generating answers (generation) and transformers' version
differences (compat)."""
