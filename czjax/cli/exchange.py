"""Exchange with PyTorch and the browser applet: `import-torch`, `export-torch`, `export-onnx`, `distill`."""

from __future__ import annotations

import sys

from czjax.cli import flags, output
from czjax.util.specs import PlayerSpec


def cmd_import_torch(args) -> int:
    from czjax.interop import torch_io
    from czjax.models import torch_layout

    model = torch_io.import_torch(args.file, args.out, args.model)
    print(f"imported {torch_layout.torch_class(model)} from {args.file} as {model}: {args.out}")
    return 0


def checkpoint_file(spec: str):
    """The checkpoint file ``spec`` names: a shipped model's (``czjax``, ``czjax@1``, ... as for
    every player), else a run folder's checkpoint or the file itself."""
    from czjax.players.loading import shipped_path
    from czjax.util import checkpoint

    return shipped_path(spec) or checkpoint.resolve(spec)


def cmd_export_torch(args) -> int:
    from czjax.interop import torch_io
    from czjax.models import torch_layout

    model = torch_io.export_torch(checkpoint_file(args.checkpoint), args.out)
    print(f"exported {model} as a {torch_layout.torch_class(model)} state dict: {args.out}")
    return 0


def cmd_distill(args) -> int:
    from czjax.jobs import distill

    teacher = output.announced(
        flags.load_player(args.teacher),
        args.games * 4 * output.AVERAGE_MOVES_PER_SIDE,
        f"{args.games:,} games against itself and the labels of their positions",
    )
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    report = distill.distill(
        teacher,
        args.model,
        args.out,
        log,
        games=args.games,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        value_weight=args.value_weight,
        temperature=args.temperature,
        seed=args.seed,
        overwrite=args.overwrite,
    )
    return output.print_report(args, report, distill.format_report)


def cmd_export_onnx(args) -> int:
    from czjax.interop import onnx_export

    ckpt = checkpoint_file(args.checkpoint)
    model = onnx_export.export(ckpt, args.out, batched=args.batch)
    shape = "(N, 6, 7) -> logits (N, 7), value (N,)" if args.batch else "(6, 7) -> logits (7,), value ()"
    print(f"exported {model} to {args.out}: board int8 {shape}")
    diff = onnx_export.max_difference(args.out, ckpt, onnx_export.sample_boards(256))
    if diff is None:
        print("(onnxruntime is not installed: the file was not checked against czjax)")
    else:
        print(f"onnxruntime check on 256 random positions: largest difference from czjax {diff:.2e}")
        if diff > 1e-4:
            raise ValueError(f"the exported model differs from czjax by {diff:.2e}")
    return 0


def add_commands(commands) -> None:

    dist = commands.add_parser(
        "distill",
        help="train a small network on a teacher's moves and values (a search, say)",
        description=(
            "As the PyTorch project's distill.py: the teacher (any player, a search included) plays itself, labels "
            "every "
            "position with its policy target (a search's visit counts or improved policy, a network's softmax) and its "
            "value, and a fresh student network learns both (cross-entropy and squared error, AdamW, minibatches). "
            "10% of "
            "the positions are held out to check it. The student is written to OUT/checkpoint.msgpack, a player for "
            "every "
            "command."
        ),
    )
    dist.add_argument("teacher", metavar="TEACHER", type=PlayerSpec.parse, help="the teacher: " + flags.player_help())
    dist.add_argument("--model", default="mlp3", help="the student's model (default: %(default)s)")
    dist.add_argument(
        "--games", type=flags.game_batch, default=2000, help="self-play games of the teacher (default: %(default)s)"
    )
    dist.add_argument(
        "--temperature",
        type=flags.non_negative_float,
        default=1.0,
        help="the teacher's sampling temperature (default: %(default)s)",
    )
    dist.add_argument("--epochs", type=flags.positive_int, default=10, help="(default: %(default)s)")
    dist.add_argument("--batch-size", type=flags.positive_int, default=256, help="(default: %(default)s)")
    dist.add_argument(
        "--lr", type=flags.non_negative_float, default=1e-3, help="AdamW learning rate (default: %(default)s)"
    )
    dist.add_argument("--value-weight", type=flags.non_negative_float, default=1.0, help="(default: %(default)s)")
    dist.add_argument("--seed", type=flags.seed, default=0)
    dist.add_argument("--out", default="runs/distill", help="(default: %(default)s)")
    dist.add_argument("--overwrite", action="store_true", help="replace a student already in --out")
    flags.add_json_flag(dist, "print the report as JSON")
    dist.set_defaults(func=cmd_distill)
    _add_torch_commands(commands)


def _add_torch_commands(commands) -> None:
    imp = commands.add_parser(
        "import-torch",
        help="a PyTorch project checkpoint (.pth) -> a czjax checkpoint",
        description=(
            "Reads the model_state_dict of a Connect-Zero .pth (SimpleMLPModel, Connect4MLP3 or Connect4CNN_Mk4 with "
            "or without value head), or of czjax's ResNet as export-torch writes it (blocks and channels read from the "
            "file); a bare state dict works too. Writes a czjax checkpoint with those weights and a fresh optimizer "
            "state. Needs PyTorch: pip install 'czjax[torch]'."
        ),
    )
    imp.add_argument("file", metavar="FILE.pth")
    imp.add_argument(
        "--model",
        default=None,
        help="mlp, mlp3, cnn-mk4, cnn-mk4-value or resnet[:blocks=B,channels=C] (default: found from the keys)",
    )
    imp.add_argument("-o", "--out", required=True, metavar="CHECKPOINT")
    imp.set_defaults(func=cmd_import_torch)
    exp = commands.add_parser(
        "export-torch",
        help="a czjax checkpoint -> a .pth for PyTorch (the project's classes, or czjax's ResNet module)",
        description=(
            "Writes {'model_state_dict': ...} with the PyTorch project's key names and layouts (mlp, mlp3, cnn-mk4, "
            "cnn-mk4-value). czjax's ResNet (resnet, the shipped model czjax) has no PyTorch project class: its file "
            "loads into czjax.interop.torch_models.ResNet(blocks, channels), or torch_models.load_resnet(FILE.pth). "
            "Needs PyTorch."
        ),
    )
    exp.add_argument(
        "checkpoint", metavar="CHECKPOINT", help="a run folder or checkpoint file, or czjax (the shipped model)"
    )
    exp.add_argument("-o", "--out", required=True, metavar="FILE.pth")
    exp.set_defaults(func=cmd_export_torch)
    onnx = commands.add_parser(
        "export-onnx",
        help="a czjax checkpoint -> ONNX for the PyTorch project's web applet",
        description=(
            "Writes an ONNX model (opset 17) of any czjax model (the PyTorch project's three and czjax's ResNet, the "
            "shipped model czjax included) with the applet's contract: input 'board' int8 (6, 7), +1 = side to move; "
            "outputs 'logits' float (7,) and 'value' float () (0 without a value head). --batch gives board (N, 6, 7), "
            "logits (N, 7), value (N,). When onnxruntime is installed the file is checked against czjax on random "
            "positions. Needs pip install 'czjax[onnx]'."
        ),
    )
    onnx.add_argument(
        "checkpoint", metavar="CHECKPOINT", help="a run folder or checkpoint file, or czjax (the shipped model)"
    )
    onnx.add_argument("-o", "--out", required=True, metavar="FILE.onnx")
    onnx.add_argument("--batch", action="store_true", help="a batched model: board (N, 6, 7)")
    onnx.set_defaults(func=cmd_export_onnx)
