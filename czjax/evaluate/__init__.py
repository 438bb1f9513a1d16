"""Floor 6: measuring players: accuracy on solver-labelled positions, puzzles, tournaments, play and serve."""
