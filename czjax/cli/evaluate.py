"""Measuring and playing: `czjax eval ...`, `tournament`, `play`, `analyze`, `openings`, `serve`."""

from __future__ import annotations

import sys
from pathlib import Path

from czjax.cli import flags, output
from czjax.util.specs import PlayerSpec


def cmd_eval_accuracy(args) -> int:
    from czjax.evaluate.positions import accuracy, format_accuracy, load_positions

    positions = load_positions(args.positions)
    agent = output.announced(flags.load_player(args.player), len(positions["boards"]), "the positions")
    return output.print_report(args, accuracy(agent, positions, log=output.stderr), format_accuracy)


def cmd_eval_pons(args) -> int:
    from czjax.evaluate import pons, protocol

    sets = pons.load_pons(args.dir)
    if args.protocol is None:
        agent = flags.load_player(args.player)
    else:
        try:
            rules = protocol.protocol_of(args.protocol)
        except ValueError as err:
            raise SystemExit(f"czjax eval pons: {err}") from None
        agent = protocol.protocol_agent(rules, args.player)
    stopped = protocol.stops_when_decided(agent, args.protocol, args.full_searches)
    output.announced(agent, sum(len(data["boards"]) for data in sets.values()), "Pons' positions", stopped)
    report = pons.pons(agent, sets, log=output.stderr, protocol=args.protocol, full_searches=args.full_searches)
    return output.print_report(args, report, pons.format_pons)


def cmd_eval_puzzles(args) -> int:
    from czjax.evaluate import puzzles

    data = puzzles.load(args.puzzles)
    agent = output.announced(flags.load_player(args.player), len(data["boards"]), "the puzzles")
    return output.print_report(args, puzzles.score(agent, data, log=output.stderr), puzzles.format_score)


def cmd_eval_make_puzzles(args) -> int:
    from czjax.evaluate import puzzles
    from czjax.jobs import folders

    folders.check_out_file(Path(args.out))  # before generating
    print(f"generating {args.per_kind:,} puzzles of each kind from seed {args.seed}", file=sys.stderr)
    records = puzzles.generate(args.seed, args.per_kind, log=lambda m: print(m, file=sys.stderr))
    puzzles.write(args.out, records)
    print(f"wrote {len(records):,} puzzles to {args.out}")
    return 0


def cmd_tournament(args) -> int:
    from czjax.evaluate import tournament

    tournament.check_entries(len(args.players), args.games)
    players = [flags.load_player(spec) for spec in args.players]
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    log(f"round robin between {len(players)} players, {args.games} games per pair")
    for agent in players:  # a search's moves: about 11 per game, in every pair it plays
        output.announced(
            agent,
            args.games * output.AVERAGE_MOVES_PER_SIDE * (len(players) - 1),
            f"its {args.games * (len(players) - 1):,} games",
        )
    report = tournament.tournament(
        players, args.games, anchor=args.anchor, seed=args.seed, log=log, temperature=args.temperature
    )
    return output.print_report(args, report, tournament.format_tournament)


REUSE_HELP = (
    "a PUCT search (mcts, entropy-mcts) keeps its tree from one position of the game to the next and starts "
    "there (off by default: at equal simulations it plays worse over the shipped networks, docs/search.md)"
)


def cmd_play(args) -> int:
    from czjax.evaluate import interactive

    agent = flags.load_player(args.player)
    temperature = agent.temperature(args.temperature)
    interactive.play(agent, first=args.first, temperature=temperature, seed=args.seed, reuse=args.reuse)
    return 0


def cmd_analyze(args) -> int:
    from czjax.evaluate import interactive

    report = interactive.analyze(
        flags.load_player(args.player), args.moves, temperature=args.temperature, seed=args.seed
    )
    return output.print_report(args, report, interactive.format_analysis)


def cmd_openings(args) -> int:
    from czjax.evaluate import interactive

    agent = output.announced(
        flags.load_player(args.player),
        args.games * 2 * output.AVERAGE_MOVES_PER_SIDE,
        f"{args.games:,} games against itself",
    )
    report = interactive.openings(
        agent, args.games, args.depth, args.top, temperature=args.temperature, seed=args.seed, log=output.stderr
    )
    return output.print_report(args, report, interactive.format_openings)


def cmd_serve(args) -> int:
    from czjax.evaluate import serve

    try:  # the address first: a host that does not resolve or a port in use costs no compile
        bound = serve.bind(args.host, args.port)
    except OSError as err:
        raise ValueError(f"cannot serve on {args.host}:{args.port}: {err.strerror or err}") from None
    try:
        agent = flags.load_player(args.player)
        print(f"compiling {agent.name} (the page opens once it is ready) ...", flush=True)
        # warm: the larger batch sizes compile in the background once the page is up
        temperature = agent.temperature(args.temperature)
        service = serve.GameService(agent, temperature=temperature, seed=args.seed, reuse=args.reuse)
        server = serve.make_server(service, warm=True, server=bound)
    except BaseException:
        bound.server_close()
        raise
    host, port = str(server.server_address[0]), server.server_address[1]
    print(
        f"playing {agent.name} at temperature {agent.temperature(args.temperature):g} at http://{host}:{port}/  "
        "(Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def add_evaluation_commands(commands) -> None:
    evaluate = commands.add_parser(
        "eval", help="measure a model: solver-labelled accuracy, tactical puzzles, move error on Pons' sets"
    )
    eval_commands = evaluate.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    _add_accuracy(eval_commands)
    _add_puzzles(eval_commands)
    _add_pons(eval_commands)
    _add_make_puzzles(eval_commands)


def _add_accuracy(eval_commands) -> None:
    acc = eval_commands.add_parser(
        "accuracy",
        help="how often the move is optimal or keeps the outcome, on solver-labelled positions",
        description=(
            "Scores the player's greedy move (its most likely column) and its sampled move (the exact expectation "
            "over its move probabilities) against perfect-solver labels: the fraction of positions where the move "
            "is optimal, and where it keeps the game-theoretic outcome (also on the positions not already lost), "
            "by ply range. Default positions: the 1,000 shipped with czjax (ply 6-30)."
        ),
    )
    flags.add_player_arg(acc)
    acc.add_argument(
        "--positions", default=None, metavar="FILE", help="a JSON Lines file in the same format (moves, scores)"
    )
    flags.add_json_flag(acc)
    acc.set_defaults(func=cmd_eval_accuracy)


def _add_puzzles(eval_commands) -> None:
    puz = eval_commands.add_parser(
        "puzzles",
        help="success on tactical puzzles: win now, or block the single threat",
        description=(
            "Scores the player on puzzles where the side to move can win at once (every winning column counts) or "
            "must block the opponent's single threat: sampled success (exact expectation) and greedy success per "
            "kind, and the value head's error on win puzzles. Default: the 10,000 puzzles shipped with czjax."
        ),
    )
    flags.add_player_arg(puz)
    puz.add_argument("--puzzles", default=None, metavar="FILE", help="a puzzles file from `czjax eval make-puzzles`")
    flags.add_json_flag(puz)
    puz.set_defaults(func=cmd_eval_puzzles)


def _add_pons(eval_commands) -> None:
    pons = eval_commands.add_parser(
        "pons",
        help="move error on Pascal Pons' benchmark sets (AlphaZero.jl's measure), and the outcome read from the value",
        description=(
            "Per set, the move error (%): how often the move the player plays (its most likely column or the "
            "search's move; the expectation over its draw for random and random-punisher) does not keep the "
            "game-theoretic outcome, as AlphaZero.jl measures it, beside AlphaZero.jl's reference figures. For a "
            "player with a value (a value head, or a search's root value), also how often the value reads the "
            "outcome right: win above +1/3, loss below -1/3, a draw between, and the sign alone on the decided "
            "positions. Default: the 6 x 1,000 positions shipped with czjax with every column's exact score (L3 ply "
            "29-41, L2 15-28, L1 1-14; R1-R3 increasingly hard for a solver); --dir reads Test_L*_R* files, which "
            "hold each position's value only: the outcome read, no move error. --protocol alphazero.jl scores as "
            "AlphaZero.jl's benchmark does: a network (or built-in player) under its MCTS with 600 simulations, "
            "cpuct 2, no noise, the most visited column (the lowest on ties); a search or minimax:depth=N as given, "
            "by its most likely column. The reference columns: AlphaZero.jl's untrained network under that "
            "protocol (iteration 0), depth-5 minimax, and its network after 15 iterations."
        ),
    )
    flags.add_player_arg(pons)
    pons.add_argument(
        "--protocol",
        default=None,
        choices=["alphazero.jl"],
        help="score as AlphaZero.jl's Pons benchmark (MCTS-600 around a network; the most likely move)",
    )
    pons.add_argument(
        "--full-searches",
        action="store_true",
        help="with --protocol: run every search to its last simulation (by default a search over a network stops "
        "once no later simulation can change its move: the same moves, the root values read at the stop)",
    )
    pons.add_argument(
        "--dir", default=None, metavar="DIR", help="a folder of Test_L*_R* files (default: the shipped sets)"
    )
    flags.add_json_flag(pons)
    pons.set_defaults(func=cmd_eval_pons)


def _add_make_puzzles(eval_commands) -> None:
    make = eval_commands.add_parser(
        "make-puzzles",
        help="generate a puzzle set from random games, deterministically from a seed",
        description="Plays random games on device, keeps distinct win and block positions, and draws a seeded sample "
        "of each kind.",
    )
    make.add_argument("--seed", type=flags.seed, default=0, help="(default: %(default)s; seed 0 is the shipped set)")
    make.add_argument(
        "--per-kind", type=flags.positive_int, default=5000, help="puzzles of each kind (default: %(default)s)"
    )
    make.add_argument("-o", "--out", required=True, metavar="FILE")
    make.set_defaults(func=cmd_eval_make_puzzles)


def add_play_commands(commands) -> None:

    tour = commands.add_parser(
        "tournament",
        help="round robin between players, with Elo ratings",
        description=(
            "Every pair of players plays --games games, half with each side first; pairs of the same model run as one "
            "compiled program. Prints the win/draw/loss table and Bradley-Terry (Elo-scale) ratings fitted by maximum "
            "likelihood, draws counted as half, with 95% intervals, anchored to --anchor. Each player plays as it "
            "does everywhere (its most likely column for a checkpoint or a search, sampled for random and "
            "random-punisher) unless --temperature says otherwise; the table says how each chose its moves."
        ),
    )
    tour.add_argument(
        "players", nargs="+", metavar="PLAYER", type=PlayerSpec.parse, help="players, each " + flags.player_help()
    )
    tour.add_argument("--games", type=flags.game_batch, default=200, help="games per pair (default: %(default)s)")
    tour.add_argument("--anchor", default=None, help="the player rated 0 (default: the first)")
    tour.add_argument(
        "--temperature",
        type=flags.non_negative_float,
        default=None,
        help="every player's sampling temperature; 0 plays its most likely column, 1 samples its policy "
        "(default: each player's own, 0 for a checkpoint or a search, 1 for random and random-punisher)",
    )
    tour.add_argument("--seed", type=flags.seed, default=0)
    flags.add_json_flag(tour)
    tour.set_defaults(func=cmd_tournament)

    _add_play(commands)


def _add_play(commands) -> None:
    from czjax.players.loading import DEFAULT_OPPONENT

    play = commands.add_parser(
        "play",
        help="play a model in the terminal",
        description="You against a model (or a built-in player) in the terminal: type a column 1-7, q to quit.",
    )
    flags.add_player_arg(play, default=DEFAULT_OPPONENT)
    play.add_argument(
        "--first", default="human", choices=["human", "model", "random"], help="who starts (default: %(default)s)"
    )
    play.add_argument("--temperature", type=flags.non_negative_float, default=None, help=flags.TEMPERATURE_HELP)
    play.add_argument("--seed", type=flags.seed, default=0)
    play.add_argument("--reuse", action="store_true", help=REUSE_HELP)
    play.set_defaults(func=cmd_play)

    analyze = commands.add_parser(
        "analyze",
        help="a game move by move: probability of the move played, entropy, value",
        description="Analyses the game given by --moves (1-based columns, first player first), or the model's own "
        "self-play game.",
    )
    flags.add_player_arg(analyze)
    analyze.add_argument("--moves", default=None, help="e.g. 4453 (default: a self-play game of the model)")
    analyze.add_argument(
        "--temperature",
        type=flags.non_negative_float,
        default=1.0,
        help="sampling temperature of the self-play game (default: %(default)s)",
    )
    analyze.add_argument("--seed", type=flags.seed, default=0)
    flags.add_json_flag(analyze)
    analyze.set_defaults(func=cmd_analyze)

    openings = commands.add_parser(
        "openings",
        help="the model's most frequent openings in self-play",
        description="Plays the model against itself on device and counts the first --depth moves of each game.",
    )
    flags.add_player_arg(openings)
    openings.add_argument("--games", type=flags.game_batch, default=1000, help="(default: %(default)s)")
    openings.add_argument(
        "--depth", type=flags.positive_int, default=4, help="moves per opening (default: %(default)s)"
    )
    openings.add_argument("--top", type=flags.positive_int, default=10, help="openings listed (default: %(default)s)")
    openings.add_argument("--temperature", type=flags.non_negative_float, default=1.0, help="(default: %(default)s)")
    openings.add_argument("--seed", type=flags.seed, default=0)
    flags.add_json_flag(openings)
    openings.set_defaults(func=cmd_openings)


def add_serve_command(commands) -> None:
    from czjax.players.loading import DEFAULT_OPPONENT

    serve = commands.add_parser(
        "serve",
        help="play a model in the browser",
        description=(
            "Serves a page on localhost where you play the model: click a column; the page shows the model's move "
            "probabilities and value after each move, who starts (you, the model or random), a New game button and "
            "the move list to copy. The model runs in czjax behind a small JSON API."
        ),
    )
    flags.add_player_arg(serve, default=DEFAULT_OPPONENT)
    serve.add_argument("--port", type=flags.port, default=8000, help="(default: %(default)s; 0 picks a free port)")
    serve.add_argument("--host", default="127.0.0.1", help="(default: %(default)s, this machine only)")
    serve.add_argument("--temperature", type=flags.non_negative_float, default=None, help=flags.TEMPERATURE_HELP)
    serve.add_argument("--seed", type=flags.seed, default=0)
    serve.add_argument("--reuse", action="store_true", help=REUSE_HELP)
    serve.set_defaults(func=cmd_serve)
