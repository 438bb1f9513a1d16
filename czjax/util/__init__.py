"""Floor 0: what every layer uses and that imports nothing of czjax: progress lines, precision,
devices, checkpoint files, the pytree dataclass."""
