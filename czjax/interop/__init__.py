"""Floor 9: exchange with other tools: PyTorch checkpoints and ONNX."""
