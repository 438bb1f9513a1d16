"""Floor 10: measuring speed: the benchmark harness, the PyTorch peer and profiling."""
