"""Floor 8: exchange with other tools: PyTorch checkpoints and ONNX."""
