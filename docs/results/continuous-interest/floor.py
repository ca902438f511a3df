"""A probe after the verdict, for the page's question of why PPO's forward model settles after the change at about
3 times its level before it, in every arm: is the world after the change slower or harder to fit, or does a model
that learned the old world learn the new one worse? On a uniformly random policy's transitions (not an agent's),
ppo_continuous_poi_ensemble.py's forward model (its defaults: 5 members of 256-256, Adam at 1e-3, batches of 256, one
pass over each 2,048-transition rollout) is trained three ways for UPDATES updates a phase (584: 73 rollouts, about
what a run's model gets in each of its two phases of 73 iterations):

- A: a fresh model on the old world's transitions, measured on the old world's held-out sets;
- B: a fresh model on the new world's, measured on the new world's;
- C: A's model, then UPDATES more on the new world's, measured on the new world's (what a run's model goes through).

The held-out sets are the runs' own (common.heldout.continuous_heldout_set: 10,240 random-policy steps a phase, and
those of them the change acts on); the error is the runs' `external_model/eval_loss` (raw units, `raw_heldout_error`).
The training transitions: STEPS a phase from the worlds of seeds 123,000 on (the held-out sets' are from 20,240,700),
rolled in 200-step worlds (Pendulum's episodes; the held-out sets' are 80 steps, the states much the same), each
rollout 2,048 of them drawn at random (one training set a phase for every seed: the seeds vary the model's
initialisation and the draws); observations normalised by the old world's training set's mean and variance in both
phases (a run's normaliser follows its agent's states; the two worlds' training means differ most in the angular
velocity, by about a fifth of its std). Prints a markdown table: per seed and update count, the errors on all held-out
transitions and on the changed ones, and the ratios B/A (the new world against the old at the same training), C/B (a
model that learned the old world first against a fresh one) and C/A (a run's model after the change against before it,
as the page's floors compare them).

    python docs/results/continuous-interest/floor.py --seeds 1 2 3 4 5 --updates 584 5000
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from algos.ppo_continuous_poi_ensemble import Args, ForwardModel, raw_heldout_error, train_forward_model  # noqa: E402
from common.console import OneLineParser  # noqa: E402
from common.heldout import continuous_heldout_tensors  # noqa: E402

ENV = "PendulumMotorChange-v1"
TRAIN_SEED, EPISODE_STEPS = 123_000, 200  # Pendulum's episodes: 200 steps
FILE = Args()  # ppo_continuous_poi_ensemble.py's defaults: its rollout, its model and the model's training
ROLLOUT, BATCH, LEARNING_RATE = FILE.num_envs * FILE.num_steps, FILE.model_batch_size, FILE.model_learning_rate


def training_sets(steps: int) -> dict[int, tuple[torch.Tensor, ...]]:
    """Each phase's random-policy training transitions (obs, actions, next_obs), drawn as the held-out sets are."""
    return {
        phase: continuous_heldout_tensors(ENV, phase, steps, EPISODE_STEPS, "cpu", seed=TRAIN_SEED)[0]
        for phase in (0, 1)
    }


def train(model, optimizer, data, statistics, updates: int, generator) -> None:
    """`updates` updates on rollouts of ROLLOUT transitions drawn from `data`, one pass over each (the last rollout
    cut to the updates left), as a run trains its model on its rollouts, in the normalised space."""
    mean, var = statistics
    obs, actions, next_obs = data
    normalise = lambda x: ((x - mean) / torch.sqrt(var + 1e-8)).clamp(-10, 10)  # noqa: E731  (make_env's wrappers)
    normalised = normalise(obs)
    deltas = normalise(next_obs) - normalised
    done = 0
    while done < updates:
        rows = torch.randint(len(obs), (ROLLOUT,), generator=generator)[: BATCH * min(ROLLOUT // BATCH, updates - done)]
        train_forward_model(model, optimizer, normalised[rows], actions[rows], deltas[rows], FILE.model_epochs, BATCH)
        done += len(rows) // BATCH


def trained(seed: int, phases, updates: int) -> ForwardModel:
    """A fresh model of the file's defaults (its initialisation and its rollouts' draws seeded by `seed`), trained
    `updates` updates on each of `phases`' (data, statistics) in turn with one optimiser, as a run's model goes on
    from one phase to the next."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = ForwardModel(3, 1, FILE.model_hidden_sizes, FILE.ensemble_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    for data, statistics in phases:
        train(model, optimizer, data, statistics, updates, generator)
    return model


def errors(model, heldout, statistics) -> list[float]:
    """The held-out errors (all, changed) in raw units."""
    return [raw_heldout_error(model, *data, *statistics) for data in heldout]


def probe(seeds, updates_list, steps: int, eval_steps: int) -> list[dict]:
    """One row per seed and update count: the errors of A, B and C (all, changed)."""
    torch.set_num_threads(1)
    sets = training_sets(steps)
    statistics = (sets[0][0].mean(0), sets[0][0].var(0))
    heldout = {phase: continuous_heldout_tensors(ENV, phase, eval_steps, 80, "cpu") for phase in (0, 1)}
    rows = []
    for seed in seeds:
        for updates in updates_list:
            row = dict(seed=seed, updates=updates)
            for name, phases in (("A", (0,)), ("B", (1,)), ("C", (0, 1))):
                model = trained(seed, [(sets[phase], statistics) for phase in phases], updates)
                row[name] = errors(model, heldout[phases[-1]], statistics)
            rows.append(row)
    return rows


def pair(errors) -> str:
    """A table cell: the errors on all held-out transitions / on those the change acts on."""
    return f"{errors[0]:.2e} / {errors[1]:.2e}"


def ratio(top, bottom) -> str:
    """A table cell: the ratio of two arms' errors, on all held-out transitions / on the changed ones."""
    return f"{top[0] / bottom[0]:.2f} / {top[1] / bottom[1]:.2f}"


def markdown(rows: list[dict]) -> str:
    out = [
        "| seed | updates a phase | A: old world | B: new world | C: old, then new | B/A | C/B | C/A |",
        "|-:|-:|-|-|-|-|-|-|",
    ]
    for row in rows:
        a, b, c = row["A"], row["B"], row["C"]
        out.append(
            f"| {row['seed']} | {row['updates']} | {pair(a)} | {pair(b)} | {pair(c)} "
            f"| {ratio(b, a)} | {ratio(c, b)} | {ratio(c, a)} |"
        )
    return "\n".join(out + ["", "Each cell: on all held-out transitions / on those the change acts on."])


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--updates", type=int, nargs="+", default=[584, 5000], help="model updates a phase")
    parser.add_argument("--steps", type=int, default=150_000, help="training transitions a phase")
    parser.add_argument("--eval-steps", type=int, default=10_240, help="held-out steps a phase (the runs': 10,240)")
    options = parser.parse_args(argv)
    if min(options.updates) < 0 or options.steps < 1 or options.eval_steps < 1:
        parser.error("--updates must be >= 0, --steps and --eval-steps >= 1")
    print(markdown(probe(options.seeds, options.updates, options.steps, options.eval_steps)))


if __name__ == "__main__":
    main()
