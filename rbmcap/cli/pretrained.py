"""``rbmcap pretrained list|check|pack``: the checkpoints shipped with rbmcap."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrained",
        help="list, check or pack the shipped pretrained models",
        description="Pretrained models ship inside the package and are used by "
        "name: `rbmcap eval --ckpt standin-rbm14 ...`.",
    )
    verbs = p.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("list", help="names, what they were trained on, recorded accuracy")
    ls.add_argument("--json", action="store_true", help="print the cards as JSON")
    ls.set_defaults(func=_list)
    chk = verbs.add_parser("check", help="measure a model on the fixed check set")
    chk.add_argument("name", help="pretrained name or checkpoint path")
    chk.add_argument("--json", action="store_true", help="print one JSON object")
    chk.set_defaults(func=_check)
    pk = verbs.add_parser("pack", help="strip a training checkpoint and ship it under a name")
    pk.add_argument("ckpt", help="checkpoint written by rbmcap-train")
    pk.add_argument("--name", required=True, help="name to ship it under")
    pk.add_argument(
        "--command",
        default=None,
        help="the command that trained it (default: the one the checkpoint records)",
    )
    pk.add_argument(
        "--trained-on",
        default=None,
        help="what it was trained on (default: the data recipe the checkpoint records)",
    )
    pk.add_argument(
        "--licence", default=None, help="the terms the model inherits from its training data (card)"
    )
    pk.add_argument("--out-dir", default=None, help="folder (default: the package's)")
    pk.set_defaults(func=_pack)


def _list(args: argparse.Namespace) -> int:
    # The library loads torch and the model code: only when the command runs, not for --help.
    from rbmcap.inference.pretrained import model_card
    from rbmcap.paths import pretrained_names  # (see above)

    cards = {n: model_card(n) for n in pretrained_names()}
    if args.json:
        print(json.dumps(cards))
        return 0
    for name, card in cards.items():
        mpjpe = card.get("check", {}).get("mpjpe_mm", {}).get("mean")
        licence = f"; licence: {card['licence']}" if card.get("licence") else ""
        print(
            f"{name}: {card.get('trained_on', '')}; check-set MPJPE {mpjpe} mm, "
            f"{card.get('size_mb')} MB{licence}"
        )
    return 0


def _check(args: argparse.Namespace) -> int:
    # The library loads torch and the model code: only when the command runs, not for --help.
    from rbmcap.inference import Predictor
    from rbmcap.inference.pretrained import check_accuracy  # (see above)

    result = check_accuracy(Predictor.from_checkpoint(args.name))
    if args.json:
        print(json.dumps(result))
    else:
        rows = ", ".join(f"{k} {v:.1f}" for k, v in result.items() if k != "mean")
        print(f"{args.name}: check-set MPJPE {result['mean']:.2f} mm ({rows})")
    return 0


def _pack(args: argparse.Namespace) -> int:
    # The library loads torch and the model code: only when the command runs, not for --help.
    from rbmcap.inference.pretrained import pack_checkpoint

    card = {"command": args.command, "trained_on": args.trained_on, "licence": args.licence}
    dst, card = pack_checkpoint(args.ckpt, args.name, card, args.out_dir)
    print(f"{dst}: {card['size_mb']} MB, check-set MPJPE {card['check']['mpjpe_mm']['mean']} mm")
    return 0
