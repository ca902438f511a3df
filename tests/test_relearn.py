"""The external model can re-learn: on random-policy data of two phases, the default key-distance
model trained to convergence on the first gets back near its held-out loss after the colour
change within a bounded number of updates; EMMA's 100-10 model with dropout 0.5 does not.

Also a measurement script (any target, size, dropout), as the docs quote it:

    python tests/test_relearn.py --target forward --hidden-sizes 256 256 --dropout 0.1 --rollouts 300 --inject 64
"""

import argparse
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algos.ppo import Args, ExternalModel, model_targets, train_external_model  # noqa: E402
from common.heldout import heldout_losses, heldout_set, heldout_tensors, random_policy_layouts  # noqa: E402

ENV_ID, COLORS = "ColorDoorKey-6x6-v0", ["red", "blue"]
ROLLOUTS_BEFORE, ROLLOUTS_AFTER = 100, 60  # rollouts of 16 worlds x 128 steps, as ppo.py's
UPDATES_BOUND = 320  # of batch 256: 40 rollouts' worth, of the 480 updates the 60 rollouts after the change give


def as_model_data(data, target):
    obs = torch.tensor(data["obs"])
    info = torch.tensor(data[target]) if target != "forward" else None
    return obs, torch.tensor(data["actions"]), model_targets(target, obs, torch.tensor(data["next_obs"]), info)


def rollouts(target, phase, count, first_seed, inject=0):
    """`count` rollouts of random-policy data of `phase` as (obs, actions, targets); with
    `inject`, each rollout also holds that many transitions the colour change alters (drawn
    from a pool of them), as an agent that uses the door would bring."""
    info_keys = () if target == "forward" else (target,)
    pool = (
        as_model_data(heldout_set(ENV_ID, COLORS, phase, target, 80, 80, 2048, seed=777)[1], target) if inject else None
    )
    generator = torch.Generator().manual_seed(phase)
    out = []
    for k in range(count):
        data = as_model_data(
            random_policy_layouts(ENV_ID, 16, 128, first_seed + 16 * k, COLORS[phase], info_keys), target
        )
        if inject:
            picks = torch.randint(len(pool[0]), (inject,), generator=generator)
            data = tuple(torch.cat([a, b[picks]]) for a, b in zip(data, pool))
        out.append(data)
    return out


def relearning(model, data, heldout, args, factor=1.5):
    """Train on phase 0's rollouts, then on phase 1's. Returns the held-out losses (all, changed)
    before the change, just after it and at the end, and the updates after the change until
    each is back within `factor` of its level before (None if never)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=args.model_learning_rate)
    for rollout in data[0]:
        train_external_model(model, optimizer, *rollout, args.model_epochs, args.model_batch_size)
    losses = lambda phase: [heldout_losses(model, **h)[0] for h in heldout[phase]]  # noqa: E731
    before, after, back, updates = losses(0), losses(1), [None, None], 0
    for rollout in data[1]:
        train_external_model(model, optimizer, *rollout, args.model_epochs, args.model_batch_size)
        updates += args.model_epochs * -(-len(rollout[0]) // args.model_batch_size)
        now = losses(1)
        back = [b if b is not None or n > factor * level else updates for b, n, level in zip(back, now, before)]
    return {"before": before, "after_change": after, "end": now, "updates_back": back}


def measure(target, hidden_sizes, dropout, rollouts_per_phase, inject=0, seed=0):
    args = Args()
    data = [
        rollouts(target, 0, rollouts_per_phase, 5_000, inject),
        rollouts(target, 1, rollouts_per_phase, 50_000, inject),
    ]
    torch.manual_seed(seed)
    model = ExternalModel(980, 7, target, hidden_sizes, dropout)
    heldout = [
        [
            heldout_tensors(model, part, target, model_targets, "cpu")
            for part in heldout_set(ENV_ID, COLORS, p, target, 2560, 80, 256)
        ]
        for p in (0, 1)
    ]
    return relearning(model, data, heldout, args)


@pytest.mark.slow
def test_default_key_distance_model_relearns_after_the_change_and_emmas_does_not():
    args = Args()
    data = [rollouts("key_distance", 0, ROLLOUTS_BEFORE, 5_000), rollouts("key_distance", 1, ROLLOUTS_AFTER, 50_000)]
    results = {}
    for name, sizes, dropout in (("default", args.model_hidden_sizes, args.model_dropout), ("emma", (100, 10), 0.5)):
        torch.manual_seed(0)
        model = ExternalModel(980, 7, "key_distance", sizes, dropout)
        heldout = [
            [
                heldout_tensors(model, part, "key_distance", model_targets, "cpu")
                for part in heldout_set(ENV_ID, COLORS, p, "key_distance", 2560, 80)
            ]
            for p in (0, 1)
        ]
        results[name] = relearning(model, data, heldout, args)
    default, emma = results["default"], results["emma"]
    assert default["after_change"][0] > 10 * default["before"][0]  # the change moved the targets
    assert default["updates_back"][0] is not None and default["updates_back"][0] <= UPDATES_BOUND, results
    assert default["updates_back"][1] is not None, results  # on the views the change altered too
    assert emma["updates_back"][0] is None, results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["key_distance", "forward"], default="key_distance")
    parser.add_argument("--hidden-sizes", type=int, nargs="+", default=list(Args().model_hidden_sizes))
    parser.add_argument("--dropout", type=float, default=Args().model_dropout)
    parser.add_argument("--rollouts", type=int, default=ROLLOUTS_BEFORE, help="rollouts per phase")
    parser.add_argument("--inject", type=int, default=0, help="transitions the change alters, added to each rollout")
    options = parser.parse_args()
    torch.set_num_threads(1)
    print(measure(options.target, tuple(options.hidden_sizes), options.dropout, options.rollouts, options.inject))
