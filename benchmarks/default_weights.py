"""Fit nbmemory's DEFAULT_WEIGHTS again, and judge them on what the fit did not see.

Builds every development corpus (LoCoMo in three forms, the technical chat of
seeds 0-2; ``nbmemory.research.default_weights.RECIPE``), embeds it with the spec
model, fits the weights the shipped way, and prints:

* held out: each fold of conversations ranked by weights fitted without it, per
  corpus, beside cosine and keywords;
* the technical chats of seeds 3-8, which no fit saw, ranked by the fitted and the
  shipped weights, cosine, keywords and RRF;
* the fitted weights beside the shipped ones (equal when nothing changed).

    python benchmarks/default_weights.py --locomo ../shared/data/locomo

About 2.5 minutes on two idle cores (the embedding most of it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from nbmemory import Memory
from nbmemory.config import DEFAULT_WEIGHTS, FEATURES
from nbmemory.research.default_weights import RECIPE, fit, judge, recipe_samples, unseen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", metavar="PATH", default=None, help="the LoCoMo folder")
    parser.add_argument("--store", default=":memory:", help="store file (default: in memory)")
    args = parser.parse_args(argv)
    show = {"float_format": lambda v: f"{v:.3f}"}
    with Memory(args.store, background_consolidation=False) as memory:
        samples = recipe_samples(memory, locomo_path=args.locomo)
        weights = fit(samples)
        print("held out (each fold ranked by weights fitted without it):")
        print(judge(samples).to_string(**show))
        later = recipe_samples(memory, seeds=RECIPE.unseen_seeds)
        print(f"\ntechnical chats of seeds {RECIPE.unseen_seeds}, which no fit saw:")
        print(unseen(later, {"fitted": weights, "shipped": DEFAULT_WEIGHTS}).to_string(**show))
    print("\nweights (fitted / shipped):")
    for name in FEATURES:
        print(f"  {name:20s} {weights[name]:6.2f} {DEFAULT_WEIGHTS[name]:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
