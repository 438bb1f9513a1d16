"""Floor 7: learning: the settings, losses, algorithms (a table), replay, opponent pools and the compiled trainer."""
