"""Floor 6: measuring players: accuracy on solver-labelled positions, Pons' sets (AlphaZero.jl's
protocol), puzzles, tournaments, play and serve."""
