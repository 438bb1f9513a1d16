"""Floor 8: running the trainer from the host: the loop with checkpoints, scans, presets, plots,
metric sinks, distillation."""
