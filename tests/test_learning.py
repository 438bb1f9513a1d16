"""Why training with search did not learn, pinned: the Gumbel search's improved policy over an
untrained network, on positions of random games, judged against the rules (wins in one, threats
to block, and quiet positions with neither)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from czjax import game, models, players, rollout, search


@pytest.fixture(scope="module")
def untrained_targets():
    model = models.get_model("mlp3")
    player = models.model_player(model)
    params = models.init_params(model, jax.random.key(0))
    traj, _ = rollout.play_games(
        jax.random.key(1), rollout.Side(players.random_player), rollout.Side(players.random_player), 64
    )
    boards = jnp.asarray(np.asarray(traj.boards())[np.asarray(traj.valid)])
    legal = np.asarray(game.legal_mask(boards))

    def winning(b):  # columns where the side to move on ``b`` completes four
        return (
            np.stack(
                [np.asarray(game.position_step(game.pack(b), jnp.full(b.shape[0], c))[1]) for c in range(game.COLS)], 1
            )
            & legal
        )

    wins, threats = winning(boards), winning(-boards)  # -boards: the opponent to move
    prior = np.asarray(jax.nn.softmax(jnp.where(legal, player(params, boards, None).logits, -jnp.inf)))
    policies = {}
    for rescale in (1, 0):
        settings = search.make_search("gumbel", f"sims=16,considered=7,rescale={rescale}")
        policies[rescale] = np.asarray(
            jax.jit(lambda k: settings.run(player, params, boards, k).policy)(jax.random.key(2))
        )
    return prior, policies, wins, threats


def kl(p, q):
    return (p * (np.log(np.maximum(p, 1e-12)) - np.log(np.maximum(q, 1e-12)))).sum(-1)


def test_rescaled_q_of_an_untrained_network_is_noise_the_learner_would_chase(untrained_targets):
    """mctx's default rescales a node's completed Q to [0, 1] by its min and max. An untrained
    value head's Q values differ by noise only, and the rescaling blows that noise up to the
    full sigma range (5 logits at 16 simulations): on quiet positions (no win, no threat) the
    target lands about a nat away from the network's own policy, a sharp random preference
    that the cross-entropy then fits (the policy collapsed to one column in the runs this
    pins). Unrescaled (``rescale=0``) the target stays at the prior where the search found
    nothing, and still moves the mass to a win where there is one."""
    prior, policies, wins, threats = untrained_targets
    quiet = ~wins.any(1) & ~threats.any(1)
    assert quiet.sum() > 200 and wins.any(1).sum() > 100
    assert kl(policies[1][quiet], prior[quiet]).mean() > 0.5
    assert kl(policies[0][quiet], prior[quiet]).mean() < 0.3  # measured 0.88 and 0.14
    for rescale in (0, 1):  # both find the wins in one: the signal to learn (0.97 and 0.95)
        assert (policies[rescale] * wins).sum(1)[wins.any(1)].mean() > 0.8


def test_sixteen_simulations_over_an_untrained_network_do_not_see_threats(untrained_targets):
    """The second half of the slow start: a threat is seen only when the search expands the
    opponent's winning reply below the move that ignores it, which 16 simulations spread over 7
    columns rarely do; with a value head that knows nothing, the target's mass on the blocking
    column stays near the prior's. Blocking must come from the value head (trained on the
    outcome) before the search can teach it: it is learnt later than winning."""
    prior, policies, wins, threats = untrained_targets
    threat_only = threats.any(1) & ~wins.any(1)
    assert threat_only.sum() > 50
    on_block = (policies[0] * threats).sum(1)[threat_only].mean()
    assert on_block < 0.5 and abs(on_block - (prior * threats).sum(1)[threat_only].mean()) < 0.15
