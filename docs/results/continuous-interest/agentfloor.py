"""The floor probe (floor.py) on agents' transitions: do what the runs' agents bring, and the statistics their
normaliser moves to, make up the rest of PPO's floor rise after the change (the runs: about 3 times; floor.py's
random-policy transitions: 1.64-1.85)?

Each seed has a run of ppo_continuous_poi_ensemble.py on PendulumMotorChange-v1 as the study's F1 (--int-coef 0
--total-timesteps 300000) with --save-model and --checkpoint-every 73, its checkpoint after iteration 73 (the last
before the change) copied aside as at-change.pt: the agent, the model and the observation statistics of the run at the
change, and (saved at its end) at the end. Each agent, acting as in training (a sample of its policy, on observations
normalised by its env 0's statistics, held fixed), rolls STEPS transitions in its own world: the agent at the change in
the old world, the agent at the end in the new (16 worlds of 200-step episodes, seeded from COLLECT_SEED). The file's
forward model trains on them as floor.py trains it, UPDATES updates a phase:

- A: a fresh model on the old world's transitions, normalised by the statistics at the change, measured on the old
  world's held-out sets;
- B: a fresh model on the new world's, normalised by the statistics at the end, measured on the new world's;
- C: A's model, then UPDATES more as B (a run's model goes so: the agent's new data, its normaliser moved);
- D: A's model, then UPDATES more on the new world's transitions normalised by the statistics at the change (C with
  the normaliser held).

And R: the run's own model at the change on the old world and at the end on the new (each with the statistics then);
and the run's own rise, its logged held-out losses' level after the change over before it (threshold.py's level).
Errors as the runs' `external_model/eval_loss` (raw units) on their held-out sets (all transitions; those the change
acts on). Prints a markdown table, a row per seed: A, B, C, D, R's two, and the ratios C/A (against the runs' 3 and
floor.py's 1.64-1.85), D/A (without the normaliser's move), B/A, R's end/change and the run's rise.

    python docs/results/continuous-interest/agentfloor.py RUNS --seeds 9101 9102 9103 9104
"""

import argparse
import math
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import algos.ppo_continuous_poi_ensemble as algo  # noqa: E402
from algos.ppo_continuous_poi_ensemble import Agent, ForwardModel, observation_statistics  # noqa: E402
from common import analyze  # noqa: E402
from common.console import OneLineParser  # noqa: E402
from common.heldout import continuous_heldout_tensors  # noqa: E402
from common.tb import read_scalars  # noqa: E402
from envs.continuous import make_continuous_env, motor_change  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floor  # noqa: E402
import threshold  # noqa: E402

COLLECT_SEED, WORLDS = 456_000, 16


def run_dir(runs: Path, seed: int) -> Path:
    """The one F1 run folder of `seed` under `runs`; ValueError (one line) if not one with both saves."""
    found = sorted(runs.glob(f"PendulumMotorChange-v1__F1__{seed}__*"))
    if len(found) != 1 or not all((found[0] / name).is_file() for name in ("agent.pt", "at-change.pt")):
        raise ValueError(f"{runs}: {len(found)} runs of seed {seed}, not one with agent.pt and at-change.pt")
    return found[0]


class Unpickler(pickle.Unpickler):
    """The checkpoint's classes: those of the file that wrote it (run as __main__) from its module."""

    def find_class(self, module, name):
        return super().find_class(algo.__name__ if module == "__main__" else module, name)


def saved(folder: Path, when: str) -> tuple[dict, ForwardModel, tuple[torch.Tensor, torch.Tensor]]:
    """The run's agent (its state dict), its model and its env 0's observation statistics (mean, var) at the change
    (at-change.pt) or at the end (its --save-model files)."""
    if when == "change":
        pickle_module = types.SimpleNamespace(Unpickler=Unpickler, load=pickle.load, __name__="pickle")
        checkpoint = torch.load(folder / "at-change.pt", weights_only=False, pickle_module=pickle_module)
        args, state, values = checkpoint["args"], checkpoint["stateful"], checkpoint["values"]
        if values["phase"] != 0 or values["global_step"] + args.batch_size <= args.change_steps[0]:
            raise ValueError(
                f"{folder / 'at-change.pt'}: step {values['global_step']}, not the last checkpoint before the change"
            )
        model = ForwardModel(3, 1, args.model_hidden_sizes, args.ensemble_size)  # Pendulum: 3 observed, 1 action
        model.load_state_dict(state["model"])
        mean, var = observation_statistics(pickle.loads(values["envs"])["envs"][0])
        return state["agent"], model.eval(), as_float32(mean, var)
    norm = np.load(folder / "obs_normalization.npz")  # each env's statistics at the end, env 0's first
    statistics = as_float32(norm["mean"][0], norm["var"][0])
    return torch.load(folder / "agent.pt"), ForwardModel.load(folder / "forward_model.pt"), statistics


def as_float32(*arrays) -> tuple[torch.Tensor, ...]:
    """The normaliser's float64 statistics as the float32 tensors the model's data are."""
    return tuple(torch.tensor(array, dtype=torch.float32) for array in arrays)


def level_ratios(scalars: dict, name: str) -> tuple[float, float]:
    """A run's own rise (all held-out transitions, changed ones), from its logged `scalars`: the level of its held-out
    loss after the change over its level before (threshold.py's level: the median of the second half of a phase's
    evaluations); `name` names the run in the error of a run without one change."""
    starts = analyze.phase_starts(scalars)
    if len(starts) != 2:
        raise ValueError(f"{name} has {len(starts)} phases, not 2")
    ratios = []
    for tag in (analyze.LOSSES["eval"], analyze.LOSSES["changed"]):
        before, after = (
            threshold.level(analyze.in_phase(scalars[tag], *span)[1]) for span in (starts, (starts[1], math.inf))
        )
        ratios.append(after / before)
    return ratios[0], ratios[1]


def collect(agent_state: dict, statistics, phase: int, steps: int, seed: int) -> tuple[torch.Tensor, ...]:
    """`steps` transitions (obs, executed actions, next obs; raw) of the agent of `agent_state` in world `phase`:
    WORLDS envs reset with seeds seed + i (and on from there), each action a sample of the policy (mean + std *
    standard normal noise from a generator seeded `seed`) on the observation normalised by `statistics` (mean, var) as
    the runs' wrappers do, clipped to the action space as their ClipAction does."""
    mean, var = (s.numpy() for s in statistics)
    envs = [make_continuous_env("PendulumMotorChange-v1") for _ in range(WORLDS)]
    for env in envs:
        motor_change(env).set_phase(phase)
    space = envs[0].action_space
    agent = Agent(space.shape[0] + 2, space.shape[0])  # Pendulum: 3 observation components, 1 action
    agent.load_state_dict(agent_state)
    generator = torch.Generator().manual_seed(seed)
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    rows = {"obs": [], "actions": [], "next_obs": []}
    for _ in range(-(-steps // WORLDS)):
        normalised = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10).astype(np.float32)
        with torch.no_grad():
            noise = torch.randn(WORLDS, space.shape[0], generator=generator)
            actions = np.clip(agent.act(torch.from_numpy(normalised), noise).numpy(), space.low, space.high)
        steps_taken = [env.step(action) for env, action in zip(envs, actions)]
        for key, value in zip(rows, (obs, actions, np.stack([step[0] for step in steps_taken]))):
            rows[key].append(value)
        obs = np.stack([env.reset()[0] if step[2] or step[3] else step[0] for env, step in zip(envs, steps_taken)])
    return tuple(torch.tensor(np.concatenate(rows[k])[:steps], dtype=torch.float32) for k in rows)


def probe(runs: Path, seeds, updates: int, steps: int, eval_steps: int) -> list[dict]:
    """One row per seed: the errors (all, changed) of A, B, C, D and R's two."""
    torch.set_num_threads(1)
    heldout = {phase: continuous_heldout_tensors(floor.ENV, phase, eval_steps, 80, "cpu") for phase in (0, 1)}
    rows = []
    for seed in seeds:
        folder = run_dir(runs, seed)
        agents, models, stats = zip(*(saved(folder, when) for when in ("change", "end")))
        stats = {"change": stats[0], "end": stats[1]}
        data = {  # the agent at the change in the old world, the agent at the end in the new
            "change": collect(agents[0], stats["change"], 0, steps, COLLECT_SEED),
            "end": collect(agents[1], stats["end"], 1, steps, COLLECT_SEED),
        }
        row = dict(seed=seed, updates=updates)
        # (name, [(data, statistics) of each phase], the held-out world and the statistics it is measured with)
        arms = [
            ("A", [("change", "change")], 0, "change"),
            ("B", [("end", "end")], 1, "end"),
            ("C", [("change", "change"), ("end", "end")], 1, "end"),
            ("D", [("change", "change"), ("end", "change")], 1, "change"),
        ]
        for name, phases, world, measured_with in arms:
            model = floor.trained(seed, [(data[data_of], stats[stats_of]) for data_of, stats_of in phases], updates)
            row[name] = floor.errors(model, heldout[world], stats[measured_with])
        row["R change"] = floor.errors(models[0], heldout[0], stats["change"])
        row["R end"] = floor.errors(models[1], heldout[1], stats["end"])
        row["run's rise"] = level_ratios(read_scalars(folder), folder.name)
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    names = ["A", "B", "C", "D", "R change", "R end"]
    ratios = [("C", "A"), ("D", "A"), ("B", "A"), ("R end", "R change")]
    out = [
        "| seed | updates a phase | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{a}/{b}" for a, b in ratios)
        + " | the run's level after / before |",
        "|-:|-:|" + "-|" * (len(names) + len(ratios) + 1),
    ]
    for row in rows:
        cells = [floor.pair(row[name]) for name in names] + [floor.ratio(row[a], row[b]) for a, b in ratios]
        cells.append("{:.2f} / {:.2f}".format(*row["run's rise"]))
        out.append(f"| {row['seed']} | {row['updates']} | " + " | ".join(cells) + " |")
    notes = ["", "Each cell: on all held-out transitions / on those the change acts on. The run's level: the median of"]
    notes += ["its logged held-out loss over the second half of a phase's evaluations (threshold.py's)."]
    return "\n".join(out + notes)


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="the folder holding the F1 run of each seed")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--updates", type=int, default=584, help="model updates a phase (a run's: about 584)")
    parser.add_argument("--steps", type=int, default=150_000, help="agent transitions a phase")
    parser.add_argument("--eval-steps", type=int, default=10_240, help="held-out steps a phase (the runs': 10,240)")
    options = parser.parse_args(argv)
    if options.updates < 0 or options.steps < 1 or options.eval_steps < 1:
        parser.error("--updates must be >= 0, --steps and --eval-steps >= 1")
    try:
        print(markdown(probe(options.runs, options.seeds, options.updates, options.steps, options.eval_steps)))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
