"""Floor 6: learning: the settings, losses, algorithms (a table), replay, opponent pools and the compiled trainer."""
