"""The PyTorch project's games: its rules on NumPy boards, its ``RandomPunisher`` (the first
winning or blocking column from the left, where czjax draws among ties) and a batch of games
played as its loops play them (:func:`play_batch`: a Python loop over plies, one forward pass
per player, ``torch.multinomial`` sampling).
"""

from __future__ import annotations

import numpy as np

from czjax.bench.torch_peer.base import import_torch

ROWS, COLS = 6, 7


def _fours(mine: np.ndarray) -> np.ndarray:
    """``(k,)``: four in a row among ``mine (k, 6, 7)``."""
    m = mine
    return (
        (m[:, :, :-3] & m[:, :, 1:-2] & m[:, :, 2:-1] & m[:, :, 3:]).any((1, 2))
        | (m[:, :-3] & m[:, 1:-2] & m[:, 2:-1] & m[:, 3:]).any((1, 2))
        | (m[:, :-3, :-3] & m[:, 1:-2, 1:-2] & m[:, 2:-1, 2:-1] & m[:, 3:, 3:]).any((1, 2))
        | (m[:, :-3, 3:] & m[:, 1:-2, 2:-1] & m[:, 2:-1, 1:-2] & m[:, 3:, :-3]).any((1, 2))
    )


def _drop_rows(boards: np.ndarray) -> np.ndarray:
    """``(k, 7)``: the row a piece dropped into each column lands on, -1 for a full column (row
    0 is the top: a column's empty cells are its top ones)."""
    return (boards == 0).sum(1) - 1


def winning_columns(boards: np.ndarray) -> np.ndarray:
    """``bool (k, 7)``: the columns where the side to move (+1) of ``boards (k, 6, 7)`` completes
    four in a row by dropping a piece."""
    k = boards.shape[0]
    rows = _drop_rows(boards)
    legal = rows >= 0
    trials = np.repeat(boards[:, None], COLS, axis=1)  # (k, 7, 6, 7): one copy per column tried
    games, cols = np.arange(k)[:, None], np.arange(COLS)[None, :]
    trials[games, cols, np.maximum(rows, 0), cols] = np.where(legal, 1, trials[games, cols, np.maximum(rows, 0), cols])
    return _fours(trials.reshape(-1, ROWS, COLS) == 1).reshape(k, COLS) & legal


# The PyTorch project's RandomPunisher returns log(one_hot + 1e-12) for a forced column: this on
# the others (about -27.6, a 1e-12 chance each under softmax), 0 on the forced one.
PUNISHER_OTHER_LOGIT = float(np.log(np.float32(1e-12)))


def random_punisher_logits(boards: np.ndarray) -> np.ndarray:
    """The PyTorch project's ``RandomPunisher`` (``find_best_move``) on ``boards (k, 6, 7)``:
    ``float32 (k, 7)`` logits. It looks for a column that wins now, then for one where the
    opponent would win next (a block), each scanned from column 0, and forces the first it finds;
    with neither, all logits are 0 (uniform over the legal columns once the sampler masks them).
    czjax's ``players.random_punisher`` spreads ties (two wins, two threats) uniformly instead."""
    wins, threats = winning_columns(boards), winning_columns(-boards)
    forced = np.where(wins.any(1), wins.argmax(1), np.where(threats.any(1), threats.argmax(1), -1))
    logits = np.zeros(boards.shape[:1] + (COLS,), np.float32)
    some = np.flatnonzero(forced >= 0)
    logits[some] = PUNISHER_OTHER_LOGIT
    logits[some, forced[some]] = 0.0
    return logits


class RandomPunisher:
    """The PyTorch project's ``RandomPunisher`` as a player of :func:`play_batch`: ``boards`` (a
    tensor) to ``(logits, None)`` (:func:`random_punisher_logits`). It has no weights."""

    def __call__(self, boards):
        torch = import_torch()
        logits = random_punisher_logits(boards.cpu().numpy())
        return torch.from_numpy(logits).to(boards.device), None


def play_batch(model, opponent, games: int) -> dict:
    """A batch of games against ``opponent`` (a frozen copy, or :class:`RandomPunisher`), as the
    PyTorch project plays them: half (rounded up) with the learner first, sampling at temperature
    1 on every ply (the opponent too: the project's ``OPPONENT_TEMPERATURE`` is 1).

    Returns ``history``: per game, the learner's ``(board, column)`` moves in order (boards
    canonical, the learner to move); ``outcome (games,)`` for the learner (+1, 0, -1); and
    ``length (games,)`` in plies."""
    torch = import_torch()
    device = next(model.parameters()).device  # the project moves boards to the model's device per ply
    boards = np.zeros((games, ROWS, COLS), np.int8)  # canonical: +1 = side to move
    done = np.zeros(games, bool)
    outcome = np.zeros(games, np.float32)  # for the learner
    length = np.zeros(games, np.int32)
    learner_first = np.arange(games) < games - games // 2
    history: list[list[tuple[np.ndarray, int]]] = [[] for _ in range(games)]
    for ply in range(ROWS * COLS):
        if done.all():
            break
        learner_moves = (ply % 2 == 0) == learner_first
        for net, mask in ((model, ~done & learner_moves), (opponent, ~done & ~learner_moves)):
            idx = np.flatnonzero(mask)
            if idx.size == 0:
                continue
            with torch.no_grad():
                logits, _ = net(torch.from_numpy(boards[idx]).to(device))
            legal = torch.from_numpy(boards[idx, 0, :] == 0).to(device)
            probs = torch.softmax(logits.masked_fill(~legal, float("-inf")), dim=-1)
            cols = torch.multinomial(probs, 1)[:, 0].cpu().numpy()
            if net is model:
                for g, c in zip(idx, cols):
                    history[g].append((boards[g].copy(), int(c)))
            drop = _drop_rows(boards[idx])[np.arange(idx.size), cols]
            boards[idx, drop, cols] = 1
            length[idx] += 1
            won = _fours(boards[idx] == 1)
            full = (boards[idx] != 0).all((1, 2))
            outcome[idx[won]] = np.where(net is model, 1.0, -1.0)
            done[idx[won | full]] = True
            boards[idx] = -boards[idx]
    return {"history": history, "outcome": outcome, "length": length}
