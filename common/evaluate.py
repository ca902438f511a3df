"""Evaluate a saved agent for N episodes: the mean and std of its return, optionally a video.

    python -m common.evaluate runs/<run> --episodes 20
    python -m common.evaluate runs/<run> --deterministic --video       # videos in <run>/eval_videos

A run saved with `--save-model` holds `policy.pt2`, its policy exported with torch.export
(observation, noise, condition -> action: no algorithm file is imported to load it), and
`policy.json`, which says how to build its env and what to feed the policy:
- `observation`: `one_hot_view` (MiniGrid's view, one-hot and flattened: envs.OneHotFlatObs) or
  `raw`, with `obs_normalization` (mean, var, clip) where the agent learned on normalised
  observations;
- `noise`: `gumbel` (discrete: the action is argmax(logits + noise), a sample of the policy)
  or `normal` (continuous: mean + std * noise, squashed where the agent squashes); zeros with
  `--deterministic` (the likeliest action, or the mean);
- `condition`: what the policy is conditioned on besides the observation, drawn per episode:
  a one-hot skill (`probs`, the skill distribution at the end of training; times `scale`; with `steps`, a new one
  after that many steps of one within an episode, or with `then_task` none, a zero input, from then on) or a random
  unit embedding (`size`); absent for the other files;
- `correct_key_color`: ColorDoorKey's correct colour for the evaluation (the run's last phase;
  `--key-color` overrides it).
A description that does not fit its policy (a size the program does not take) or its env is refused, one line,
before any episode.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

from common.console import OneLineParser, first_line

POLICY, POLICY_META = "policy.pt2", "policy.json"


class ExportedPolicy(nn.Module):
    """`agent.act(x, noise)` on x = the observation and the condition (empty when there is none)."""

    def __init__(self, agent: nn.Module):
        super().__init__()
        self.agent = agent

    def forward(self, obs, noise, condition):
        return self.agent.act(torch.cat([obs, condition], dim=-1), noise)


def condition_size(meta: dict) -> int:
    condition = meta.get("condition")
    if condition is None:
        return 0
    return len(condition["probs"]) if condition["kind"] == "one_hot" else condition["size"]


def save_policy(run_dir: Path, agent: nn.Module, obs_dim: int, meta: dict) -> None:
    """Export `agent.act` (a copy on the CPU) for one observation at a time, and write `meta`."""
    policy = ExportedPolicy(copy.deepcopy(agent).cpu().eval())
    example = (torch.zeros(1, obs_dim), torch.zeros(1, meta["noise_size"]), torch.zeros(1, condition_size(meta)))
    with torch.no_grad():
        torch.export.save(torch.export.export(policy, example), Path(run_dir) / POLICY)
    (Path(run_dir) / POLICY_META).write_text(json.dumps(meta, indent=2))


def make_eval_env(meta: dict, key_color: str | None, render: bool) -> gym.Env:
    """The run's env as its policy saw it: MiniGrid's view one-hot (the observation wrapper the
    algorithm files use), or a continuous env whose observations `observation_transform` normalises."""
    render_mode = "rgb_array" if render else None
    if meta["observation"] == "one_hot_view":
        from envs import OneHotFlatObs, resolve_env_id

        env = gym.make(resolve_env_id(meta["env"]), render_mode=render_mode)
        color = key_color or meta.get("correct_key_color")
        if color is not None and not hasattr(env.unwrapped, "set_correct_key_color"):
            raise ValueError(f"{meta['env']} has no key colours to set (correct_key_color {color!r})")
        if color is not None:
            env.unwrapped.set_correct_key_color(color)
        return OneHotFlatObs(env)
    from envs.continuous import make_continuous_env

    return make_continuous_env(meta["env"], render_mode=render_mode)


def observation_transform(meta: dict):
    """Float32 observations, normalised as in training where the agent learned on normalised ones."""
    norm = meta.get("obs_normalization")
    if norm is None:
        return lambda obs: np.asarray(obs, dtype=np.float32)
    mean, std = np.asarray(norm["mean"]), np.sqrt(np.asarray(norm["var"]) + norm["epsilon"])
    return lambda obs: np.clip((obs - mean) / std, -norm["clip"], norm["clip"]).astype(np.float32)


def evaluate(
    run_dir: Path,
    episodes: int,
    deterministic: bool = False,
    seed: int = 0,
    video: bool = False,
    key_color: str | None = None,
) -> dict:
    """Run the saved policy for `episodes` episodes (env seeds seed, seed+1, ...); returns the
    returns and lengths of the episodes and their means and stds."""
    run_dir = Path(run_dir)
    meta = read_policy_meta(run_dir)
    try:
        env = make_eval_env(meta, key_color, video)
    except gym.error.Error as error:  # an env this machine does not have (ValueError: a name envs/ refuses)
        raise ValueError(f"{run_dir / POLICY_META}: its env cannot be made ({first_line(error)})") from None
    try:
        try:
            program = torch.export.load(run_dir / POLICY)
        except Exception as error:  # noqa: BLE001 (a damaged archive can raise almost anything)
            raise ValueError(f"{run_dir / POLICY} cannot be read ({first_line(error)})") from None
        transform = fitted(run_dir, meta, program, env)
    except ValueError:
        env.close()
        raise
    policy = program.module()
    if video:
        env = gym.wrappers.RecordVideo(env, str(run_dir / "eval_videos"), episode_trigger=lambda episode: True)
    if isinstance(env.action_space, gym.spaces.Box):
        env = gym.wrappers.ClipAction(env)
    generator = torch.Generator().manual_seed(seed)
    returns, lengths = [], []
    for episode in range(episodes):
        condition, age = draw_condition(meta, generator), 0
        obs, _ = env.reset(seed=seed + episode)
        done, total, length = False, 0.0, 0
        while not done:
            noise = torch.zeros(1, meta["noise_size"]) if deterministic else draw_noise(meta, generator)
            with torch.no_grad():
                action = policy(torch.as_tensor(transform(obs))[None], noise, condition)[0].numpy()
            obs, reward, terminated, truncated, _ = env.step(action)
            total, length, done = total + float(reward), length + 1, terminated or truncated
            condition, age = next_condition(meta, condition, age + 1, generator)
        returns.append(total)
        lengths.append(length)
    env.close()
    return dict(
        episodes=episodes,
        return_mean=float(np.mean(returns)),
        return_std=float(np.std(returns)),
        length_mean=float(np.mean(lengths)),
        returns=returns,
        lengths=lengths,
    )


META_KEYS = {"env": str, "observation": str, "noise": str, "noise_size": int}
"""what every policy.json holds, and of which type (the rest is optional: condition, correct_key_color, ...)"""
META_CHOICES = {"observation": ("one_hot_view", "raw"), "noise": ("gumbel", "normal")}


def read_policy_meta(run_dir: Path) -> dict:
    """The saved policy's description (policy.json); ValueError, one line naming the file, if it cannot be read or
    lacks, mistypes or misnames what the evaluation reads (a hand-edited file)."""
    path = run_dir / POLICY_META
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} cannot be read ({first_line(error)})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is not a policy's description (a JSON object)")
    wrong = [key for key, kind in META_KEYS.items() if type(meta.get(key)) is not kind]  # bool is no size
    if wrong:
        raise ValueError(f"{path} lacks or mistypes {', '.join(wrong)}")
    if meta["noise_size"] < 1:
        raise ValueError(f"{path}: noise_size is {meta['noise_size']}, not a positive size")
    for key, choices in META_CHOICES.items():
        if meta[key] not in choices:
            raise ValueError(f"{path}: {key} is {meta[key]!r}, not one of {', '.join(choices)}")
    condition = meta.get("condition")
    one_hot = (
        isinstance(condition, dict) and condition.get("kind") == "one_hot" and isinstance(condition.get("probs"), list)
    )
    vector = (
        isinstance(condition, dict) and condition.get("kind") == "unit_vector" and type(condition.get("size")) is int
    )
    if condition is not None and not (one_hot or vector):
        raise ValueError(f"{path}: condition is neither a one_hot with probs nor a unit_vector with a size")
    return meta


def fitted(run_dir: Path, meta: dict, program, env: gym.Env):
    """`observation_transform(meta)`, once the description (a hand may have edited it) is seen to fit its env and the
    exported program: its normalisation and condition read, and the program takes an observation, a noise and a
    condition of the sizes they give (read off its inputs: nothing is run); ValueError, one line, where not."""
    path = run_dir / POLICY_META
    try:
        transform = observation_transform(meta)
        obs_size = transform(np.zeros(env.observation_space.shape)).size
        draw_condition(meta, torch.Generator().manual_seed(0))
    except Exception as error:  # noqa: BLE001 (a missing key, a wrong type, a shape)
        raise ValueError(f"{path} does not fit its env ({first_line(error)})") from None
    names = set(program.graph_signature.user_inputs)
    takes = {n.name: n.meta["val"].shape[-1] for n in program.graph.nodes if n.op == "placeholder" and n.name in names}
    given = {"obs": obs_size, "noise": meta["noise_size"], "condition": condition_size(meta)}
    wrong = [
        f"{name} of size {size} (it takes {takes.get(name)})" for name, size in given.items() if takes.get(name) != size
    ]
    if wrong:
        raise ValueError(f"{path} does not fit {POLICY}: {', '.join(wrong)}")
    return transform


def draw_noise(meta: dict, generator: torch.Generator) -> torch.Tensor:
    if meta["noise"] == "gumbel":
        uniform = torch.rand(1, meta["noise_size"], generator=generator).clamp_min(1e-20)
        return -torch.log(-torch.log(uniform))
    return torch.randn(1, meta["noise_size"], generator=generator)


def draw_condition(meta: dict, generator: torch.Generator) -> torch.Tensor:
    condition = meta.get("condition")
    if condition is None:
        return torch.zeros(1, 0)
    if condition["kind"] == "one_hot":
        probs = torch.tensor(condition["probs"])
        one_hot = nn.functional.one_hot(torch.multinomial(probs, 1, generator=generator), len(probs)).float()
        return condition.get("scale", 1.0) * one_hot
    vector = torch.randn(1, condition["size"], generator=generator)
    return vector / vector.norm()


def next_condition(meta: dict, condition: torch.Tensor, age: int, generator: torch.Generator):
    """The condition for the episode's next step and its age, after `age` steps of `condition`: the same until the
    condition's `steps` (0 or absent: one per episode), then a new draw, or with `then_task` none (zeros) to the end,
    as the skill file's training loop does."""
    spec = meta.get("condition") or {}
    if not spec.get("steps") or age < spec["steps"]:
        return condition, age
    if spec.get("then_task"):
        return torch.zeros_like(condition), age
    return draw_condition(meta, generator), 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run folder written with --save-model")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default: %(default)s)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the first episode's env and of the noise (default: %(default)s)"
    )
    parser.add_argument(
        "--deterministic", action="store_true", help="the likeliest action (discrete) or the mean (continuous)"
    )
    parser.add_argument(
        "--key-color", default=None, help="ColorDoorKey's correct key colour (default: the run's last phase)"
    )
    parser.add_argument("--video", action="store_true", help="record every episode into <run_dir>/eval_videos")
    parser.add_argument("--json", default=None, help="also write the result (with each episode's return) to this file")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    try:
        if args.episodes <= 0:
            raise ValueError(f"--episodes must be positive, got {args.episodes}")
        if not run_dir.is_dir():
            raise ValueError(f"no run folder {run_dir}")
        if not (run_dir / POLICY).is_file() or not (run_dir / POLICY_META).is_file():
            raise ValueError(
                f"no {POLICY} and {POLICY_META} in {run_dir}: run the algorithm with --save-model to the end"
            )
        if args.seed < 0:  # the envs' seeds, seed ... seed + episodes - 1, go to numpy's SeedSequence
            raise ValueError(f"--seed must be 0 or more, got {args.seed}")
        if args.json is not None and not Path(args.json).resolve().parent.is_dir():
            raise ValueError(f"--json {args.json}: its folder does not exist")
        if args.json is not None and Path(args.json).is_dir():
            raise ValueError(f"--json {args.json} is a folder; it names the file to write")
        meta = read_policy_meta(run_dir)
        if args.key_color is not None and meta.get("correct_key_color") is None:
            raise ValueError("--key-color needs a ColorDoorKey run")
        result = evaluate(run_dir, args.episodes, args.deterministic, args.seed, args.video, args.key_color)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"{run_dir}: {result['episodes']} episodes, return {result['return_mean']:.3f} +- {result['return_std']:.3f}, "
        f"length {result['length_mean']:.1f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
