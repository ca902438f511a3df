"""Raw env steps/s against training SPS of algorithm files, one process each, same machine, same run.

    python -m common.benchmark --algos ppo --env ColorDoorKey-8x8 --rounds 3 --vector-envs minigrid batched
    python -m common.benchmark --algos --num-envs 64 --vector-envs minigrid batched    # raw env only
    python -m common.benchmark --profile --vector-envs minigrid                          # where the time goes
    python -m common.benchmark --poi --algos ppo_poi_disagreement ppo_poi_ensemble ppo_poi_grad  # the POI alone
    python -m common.benchmark --algos ppo --vector-envs batched --compare HEAD~1 --variant="--bf16 on"
    python -m common.benchmark --update --algos ppo ppo_poi_ensemble   # one PPO minibatch update, optimiser and precision
    python -m common.benchmark --flops --algos ppo --vector-envs batched  # a run's matrix products against the core's rate
    python -m common.benchmark --algos sac_forward_model --env Pendulum-v1 --total-timesteps 3000 \
        --extra "--learning-starts 1000" --compare HEAD~1    # a continuous file on its own env: no raw env row

Rounds interleave the measurements so that load from elsewhere on the machine hits them
alike; the table gives medians and the ratio of medians.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from common.console import OneLineParser
from common.heldout import random_policy_transitions
from common.runs import machine
from common.sweep import check_command
from common.tb import read_scalars
from envs import OneHotFlatObs, is_color_door_key, make_vector_env, resolve_env_id, view_columns
from envs.continuous import check_continuous_env

CONTINUOUS = ("sac_forward_model", "ppo_continuous_poi_ensemble")  # own envs: no vector env kinds, no raw env row

ROOT = Path(__file__).resolve().parents[1]


def export_revision(ref: str, into: Path) -> Path:
    """The files of git revision `ref` of this repository, written into `into` (which is returned)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def raw_env_steps_per_second(env_id: str, num_envs: int, num_steps: int, vector_env: str, seed: int = 0) -> float:
    """Random actions through the vector env and wrappers the algorithm files use (`envs.make_vector_env`)."""
    envs = make_vector_env(env_id, num_envs, vector_env)
    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.integers(envs.single_action_space.n, size=(num_steps // num_envs, num_envs))
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    elapsed = time.perf_counter() - start
    envs.close()
    return len(actions) * num_envs / elapsed


def training_sps(algo: str, env: str, total_timesteps: int, extra: list[str], root: Path = ROOT) -> float:
    """The last `charts/SPS` an algorithm file (of the checkout at `root`) logs: global steps over wall time since its start."""
    with tempfile.TemporaryDirectory() as runs_dir:
        cmd = [
            sys.executable,
            str(root / "algos" / f"{algo}.py"),
            "--env",
            env,
            "--total-timesteps",
            str(total_timesteps),
            "--runs-dir",
            runs_dir,
            *extra,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{algo} failed: {proc.stderr.strip().splitlines()[-1:]}")
        (run_dir,) = Path(runs_dir).iterdir()
        return read_scalars(run_dir)["charts/SPS"][-1][1]


PROFILE_ROWS = [  # (what, does a pstats key (file, line, function) belong to it); rows overlap
    ("env steps (SyncVectorEnv.step with all wrappers)", lambda f, n: n == "step" and f.endswith("sync_vector_env.py")),
    ("env steps (BatchedColorDoorKey.step)", lambda f, n: n == "step" and f.endswith("batched.py")),
    ("policy and value forward, rollout and PPO update", lambda f, n: n == "get_action_and_value"),
    ("backward passes, PPO update and external model", lambda f, n: "run_backward" in n),
    ("Adam steps, PPO update and external model", lambda f, n: n == "step" and f.endswith("adam.py")),
    ("external model training (its forward, backward, Adam)", lambda f, n: n == "train_external_model"),
    ("external model held-out evaluation", lambda f, n: n == "heldout_losses"),
    ("POI computation", lambda f, n: n == "poi_values"),
    ("held-out set collection (once per phase)", lambda f, n: n == "heldout_set"),
]


def profile(algo: str, env: str, total_timesteps: int, extra: list[str]) -> None:
    """Run one algorithm file under cProfile and print where its time goes."""
    import pstats

    with tempfile.TemporaryDirectory() as runs_dir:
        out = Path(runs_dir) / "profile.out"
        cmd = [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(out),
            str(ROOT / "algos" / f"{algo}.py"),
            "--env",
            env,
            "--total-timesteps",
            str(total_timesteps),
            "--runs-dir",
            runs_dir,
            *extra,
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        stats = pstats.Stats(
            str(out)
        ).stats  # {(file, line, function): (calls, primitive calls, tottime, cumtime, callers)}

    def cumtime(belongs) -> float:
        return sum(value[3] for (file, _, name), value in stats.items() if belongs(file, name))

    script = cumtime(lambda f, n: n == "<module>" and f.endswith(f"{algo}.py"))
    print(
        f"\n{algo} {' '.join(extra)} under cProfile, {total_timesteps:,} steps: {script:.1f} s in the script (imports included)\n"
    )
    print("| where (rows overlap) | seconds | share |\n|-|-|-|")
    for label, belongs in PROFILE_ROWS:
        seconds = cumtime(belongs)
        if seconds:
            print(f"| {label} | {seconds:.2f} | {seconds / script:.0%} |")


def update_table(
    algos: list[str], batch: int, rounds: int, reps: int = 50, env_id: str = "ColorDoorKey-8x8-v0"
) -> None:
    """Milliseconds of one PPO minibatch update of each file's `Agent` (random-policy views of `env_id`,
    7 actions, a PPO-shaped loss, backward, gradient clipping, Adam), per optimiser path and precision,
    on the view's columns `env_id` can set (as the files run) and on all 980 (as before `keep_columns`)."""
    import torch

    torch.set_num_threads(1)
    views = torch.tensor(random_policy_transitions(OneHotFlatObs(gym.make(env_id)), 2048, seed=0)["obs"])
    columns = view_columns(env_id)
    print(f"\none PPO minibatch update, batch {batch}, one thread, median of {rounds} x {reps} updates (ms)\n")
    print(
        "| file | float32, 980 columns | float32, view columns | --bf16 on, 980 columns | --bf16 on, view columns |\n"
        "|-|-|-|-|-|"
    )
    for algo in algos:
        module = importlib.import_module(f"algos.{algo}")
        generator = torch.Generator().manual_seed(0)
        x = views[torch.randint(len(views), (batch,), generator=generator)]
        actions = torch.randint(7, (batch,), generator=generator)
        cells = []
        for bf16, kept in ((False, None), (False, columns), (True, None), (True, columns)):
            agent = module.Agent(980, 7, bf16=bf16, columns=kept)
            optimizer = torch.optim.Adam(agent.parameters(), lr=5e-4, eps=1e-5, fused=True)

            def update():
                _, logprob, entropy, *values = agent.get_action_and_value(x, actions)
                loss = -logprob.exp().mean() - 0.01 * entropy.mean() + sum(0.5 * (v**2).mean() for v in values)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()

            for _ in range(10):  # warm-up
                update()
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(reps):
                    update()
                times.append(1000 * (time.perf_counter() - start) / reps)
            cells.append(f"{statistics.median(times):.2f}")
        print(f"| {algo} | {' | '.join(cells)} |")


FLOP_COUNTER = """
import json, runpy, sys
from torch.utils.flop_counter import FlopCounterMode
sys.argv = sys.argv[1:]
with FlopCounterMode(display=False) as counter:
    runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps({name: sum(ops.values()) for name, ops in counter.get_flop_counts().items() if "." not in name}))
"""


def product_flops(algo: str, env: str, total_timesteps: int, extra: list[str]) -> dict[str, int]:
    """Floating-point operations of the matrix products (forward and backward) of one training run,
    in all (`Global`) and by top-level module class, counted by torch's `FlopCounterMode`."""
    with tempfile.TemporaryDirectory() as runs_dir:
        cmd = [
            sys.executable,
            "-c",
            FLOP_COUNTER,
            str(ROOT / "algos" / f"{algo}.py"),
            "--env",
            env,
            "--total-timesteps",
            str(total_timesteps),
            "--runs-dir",
            runs_dir,
            *extra,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{algo} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def product_rate(m: int, k: int, n: int, dtype: str, rounds: int, reps: int = 20) -> float:
    """GFLOP/s of an (m, k) by (k, n) matrix product on one thread, median of `rounds` x `reps`."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(m, k).to(getattr(torch, dtype)), torch.randn(k, n).to(getattr(torch, dtype))
    for _ in range(3):  # warm-up
        a @ b
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        times.append((time.perf_counter() - start) / reps)
    return 2 * m * k * n / statistics.median(times) / 1e9


MODULE_NAMES = {"Sequential": "actor and critic"}  # the files' Agent calls its nn.Sequential networks, not itself


def flops_table(
    algos: list[str], env: str, total_timesteps: int, extra: list[str], rounds: int, shape: tuple[int, int, int]
) -> None:
    """Each file's matrix-product arithmetic in a run, the seconds it needs at the rate one core
    reaches on a `shape` product (its largest; a floor: smaller products run slower), and the run's
    time (median of `rounds` runs without the counter)."""
    rates = {dtype: product_rate(*shape, dtype, rounds) for dtype in ("float32", "bfloat16")}
    square = {dtype: product_rate(2048, 2048, 2048, dtype, rounds, reps=3) for dtype in ("float32", "bfloat16")}
    print(
        f"\none thread, GFLOP/s of a {' x '.join(map(str, shape))} product: float32 {rates['float32']:.0f}, "
        f"bfloat16 {rates['bfloat16']:.0f} (2048 x 2048 x 2048: {square['float32']:.0f} and {square['bfloat16']:.0f})"
    )
    print(f"\n{env}, {total_timesteps:,} steps, flags: {' '.join(extra)}\n")
    print(
        "| file | GFLOP of matrix products (by module) | s at the float32 rate | s at the bfloat16 rate "
        "| training s (steps/s) | float32 floor / training |\n|-|-|-|-|-|-|"
    )
    for algo in algos:
        counts = product_flops(algo, env, total_timesteps, extra)
        total = counts.pop("Global", 0) / 1e9
        parts = ", ".join(
            f"{MODULE_NAMES.get(name, name)} {flops / 1e9:,.0f}"
            for name, flops in sorted(counts.items(), key=lambda kv: -kv[1])
            if flops >= 5e8
        )
        sps = statistics.median(training_sps(algo, env, total_timesteps, extra) for _ in range(rounds))
        floor = total / rates["float32"]
        print(
            f"| {algo} | {total:,.0f} ({parts}) | {floor:.1f} | {total / rates['bfloat16']:.1f} "
            f"| {total_timesteps / sps:.1f} ({sps:.0f}) | {floor * sps / total_timesteps:.0%} |"
        )


UPDATE_FILES = [
    "ppo",
    "ppo_poi_replay",
    "ppo_poi_disagreement",
    "ppo_poi_ensemble",
    "ppo_poi_grad",
    "ppo_poi_progress",
    "ppo_poi_diayn",
    "ppo_poi_emb",
]
POI_FIELDS = {  # file: (its ExternalModel's extra arguments, its poi_values' extra arguments), the files' defaults
    "ppo_poi_disagreement": ({}, {"num_samples": 30}),
    "ppo_poi_ensemble": ({"num_members": 5}, {}),
    "ppo_poi_grad": ({}, {}),
}


def poi_measurements(algo: str, env_id: str, model_target: str, num_steps: int, rounds: int) -> dict:
    """One file's `poi_values`, `rounds` times on the same `num_steps` random-policy
    transitions of `env_id`, under an external model of the files' default sizes trained for
    10 passes on them (one torch thread). Returns the seconds of each round, how many
    transitions are distinct model inputs, and how the values vary between rounds: the
    coefficient of variation of the batch's mean POI, that of each input's POI (averaged),
    and the correlation over inputs of one round's values with the next round's (averaged)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    module = importlib.import_module(f"algos.{algo}")
    env = OneHotFlatObs(gym.make(env_id))
    data = random_policy_transitions(env, num_steps, seed=0, info_keys=("key_distance",))
    obs, actions = torch.tensor(data["obs"]), torch.tensor(data["actions"])
    targets = module.model_targets(
        model_target, obs, torch.tensor(data["next_obs"]), torch.tensor(data["key_distance"])
    )
    model_kwargs, poi_kwargs = POI_FIELDS[algo]
    hidden_sizes = (300, 100, 300) if model_target == "forward" else (100, 10)
    model = module.ExternalModel(
        obs.shape[1],
        int(env.action_space.n),
        model_target,
        hidden_sizes,
        0.5,
        **model_kwargs,
        columns=view_columns(env_id),
    )  # as the files build it
    module.train_external_model(model, torch.optim.Adam(model.parameters()), obs, actions, targets, 10, 256)
    distinct = len(torch.unique(model.inputs(obs, actions), dim=0))
    module.poi_values(model, obs, actions, **poi_kwargs)  # warm-up
    seconds, values = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        values.append(module.poi_values(model, obs, actions, **poi_kwargs))
        seconds.append(time.perf_counter() - start)
    if rounds < 2:
        return dict(seconds=seconds, distinct=distinct, mean_cv=math.nan, input_cv=math.nan, correlation=math.nan)
    values = torch.stack(values).double()  # (rounds, transitions)
    means, input_means = values.mean(1), values.mean(0)
    input_cv = (values.std(0) / input_means)[input_means > 0].mean().item()
    correlation = statistics.mean(torch.corrcoef(values[i : i + 2])[0, 1].item() for i in range(rounds - 1))
    return dict(
        seconds=seconds,
        distinct=distinct,
        mean_cv=(means.std() / means.mean()).item(),
        input_cv=input_cv,
        correlation=correlation,
    )


def poi_table(algos: list[str], env_id: str, num_steps: int, rounds: int) -> None:
    print(f"\npoi_values on {num_steps:,} random-policy transitions of {env_id}, one thread, {rounds} rounds\n")
    print(
        "| file | model | distinct inputs | ms (median) | rounds (ms) | CV of the mean POI | CV of an input's POI "
        "| correlation between rounds |\n|-|-|-|-|-|-|-|-|"
    )
    for algo in algos:
        for model_target in ("forward", "key_distance"):
            m = poi_measurements(algo, env_id, model_target, num_steps, rounds)
            rounds_ms = ", ".join(f"{1000 * s:.0f}" for s in m["seconds"])
            print(
                f"| {algo} | {model_target} | {m['distinct']} | {1000 * statistics.median(m['seconds']):.0f} | "
                f"{rounds_ms} | {m['mean_cv']:.3f} | {m['input_cv']:.3f} | {m['correlation']:.3f} |"
            )


def checkout() -> str:
    """This checkout's commit, and whether its files differ from it (which a table measured here then includes)."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not commit:
        return "not a git checkout"
    changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return f"the checkout at {commit}" + (" with uncommitted changes" if changed.stdout.strip() else "")


def main() -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--algos", nargs="*", default=["ppo"], help="algorithm files (names under algos/); none: raw env only"
    )
    parser.add_argument("--env", default="ColorDoorKey-8x8")
    parser.add_argument(
        "--num-envs", type=int, default=16, help="vector envs, for the raw rate and training (discrete files only)"
    )
    parser.add_argument("--total-timesteps", type=int, default=65_536, help="steps of each training run")
    parser.add_argument("--raw-steps", type=int, default=40_000, help="steps of each raw env measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--extra", default="", help="more flags for every training run, one string")
    parser.add_argument(
        "--vector-envs",
        nargs="+",
        default=["minigrid"],
        choices=["minigrid", "batched"],
        help="vector env implementations to measure, raw and in training (discrete files only)",
    )
    parser.add_argument(
        "--compare",
        nargs="*",
        default=[],
        metavar="REF",
        help="git revisions whose algorithm files run side by side with this checkout's",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="FLAGS",
        help="a flag set measured as a row of its own beside the defaults, e.g. --variant='--bf16 on' (repeatable)",
    )
    parser.add_argument(
        "--update", action="store_true", help="instead: time one PPO minibatch update of each file's agent"
    )
    parser.add_argument("--update-batch", type=int, default=512, help="minibatch size (--update)")
    parser.add_argument("--profile", action="store_true", help="instead: profile each algorithm once (cProfile)")
    parser.add_argument(
        "--poi", action="store_true", help=f"instead: time the POI computation of {', '.join(POI_FIELDS)}"
    )
    parser.add_argument(
        "--flops",
        action="store_true",
        help="instead: count each file's matrix-product arithmetic in a run against one core's rate",
    )
    parser.add_argument("--poi-steps", type=int, default=2048, help="transitions the POI is computed on (--poi)")
    args = parser.parse_args()
    continuous = bool(args.algos) and all(a in CONTINUOUS for a in args.algos)
    try:
        missing = [a for a in args.algos if not (ROOT / "algos" / f"{a}.py").is_file()]
        if missing:
            raise ValueError(f"no algorithm file for {missing} under {ROOT / 'algos'}")
        if continuous:
            if args.update or args.poi or args.profile:
                raise ValueError(f"{', '.join(CONTINUOUS)} are measured by steps/s and --flops only")
            if args.env == parser.get_default("env"):
                raise ValueError(f"{', '.join(CONTINUOUS)} need --env, a continuous one (e.g. Pendulum-v1)")
            check_continuous_env(args.env)
            env_id, args.vector_envs = args.env, [None]
        elif set(args.algos) & set(CONTINUOUS):
            raise ValueError(
                f"{', '.join(CONTINUOUS)} run on their own envs: measure them apart from the discrete files"
            )
        else:
            env_id = resolve_env_id(args.env)
        if "batched" in args.vector_envs and not is_color_door_key(env_id):
            raise ValueError(f"the batched env is ColorDoorKey only, got {args.env}")
        for flag in ("rounds", "poi_steps", "update_batch", "num_envs", "total_timesteps", "raw_steps"):
            if getattr(args, flag) < 1:
                raise ValueError(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
        if args.update and set(args.algos) - set(UPDATE_FILES):
            raise ValueError(
                f"--update knows {', '.join(UPDATE_FILES)}, got {sorted(set(args.algos) - set(UPDATE_FILES))}"
            )
        for ref in args.compare:
            verify = ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"]
            if subprocess.run(verify, capture_output=True).returncode:
                raise ValueError(f"--compare: {ref} is not a revision of the git repository at {ROOT}")
            for algo in args.algos:
                exists = ["git", "-C", str(ROOT), "cat-file", "-e", f"{ref}:algos/{algo}.py"]
                if subprocess.run(exists, capture_output=True).returncode:
                    raise ValueError(f"--compare: {ref} has no algos/{algo}.py")
        if args.poi and not is_color_door_key(env_id):
            raise ValueError(f"--poi times the key-distance model too, which needs ColorDoorKey, got {args.env}")
        if args.poi and set(args.algos) - set(POI_FIELDS):
            raise ValueError(f"--poi knows {', '.join(POI_FIELDS)}, got {sorted(set(args.algos) - set(POI_FIELDS))}")
    except ValueError as error:
        sys.exit(f"error: {error}")

    print(f"measured on {machine()}, {checkout()}")  # what a table's figures hold for (docs/benchmarks.md)
    if args.update:
        update_table(args.algos, args.update_batch, args.rounds, env_id=resolve_env_id(args.env))
        return
    if args.poi:
        poi_table(args.algos, env_id, args.poi_steps, args.rounds)
        return
    extra = ([] if continuous else ["--num-envs", str(args.num_envs)]) + args.extra.split()
    for algo, vector_env, flags in itertools.product(args.algos, args.vector_envs, ["", *args.variant]):
        kind = ["--vector-env", vector_env] if vector_env else []  # each training run's flags, before any measuring
        budget = ["--env", args.env, "--total-timesteps", str(args.total_timesteps)]
        try:
            check_command(algo, [*budget, *extra, *kind, *flags.split()])
        except ValueError as error:
            sys.exit(f"error: {algo}{f' {flags}' if flags else ''}: {error}")
    if args.flops:
        if continuous:  # a batch of 256 through a 256-wide hidden layer (SAC's networks, the forward models')
            flops_table(args.algos, args.env, args.total_timesteps, extra, args.rounds, (256, 256, 256))
            return
        columns = view_columns(env_id)
        shape = (256, 980 if columns is None else len(columns), 256)  # a PPO minibatch through a first layer
        for vector_env in args.vector_envs:
            kind = [*extra, "--vector-env", vector_env]
            flops_table(args.algos, args.env, args.total_timesteps, kind, args.rounds, shape)
        return
    if args.profile:
        for algo in args.algos:
            for vector_env in args.vector_envs:
                profile(algo, args.env, args.total_timesteps, [*extra, "--vector-env", vector_env])
        return
    with tempfile.TemporaryDirectory() as checkouts:
        names = [] if continuous else [(f"raw env [{v}]", None, v, ROOT, []) for v in args.vector_envs]
        runs = [
            ("", ROOT, flags) for flags in ["", *args.variant]
        ]  # the variants on this checkout, the revisions at their defaults
        runs += [(f" @{ref}", export_revision(ref, Path(checkouts) / str(i)), "") for i, ref in enumerate(args.compare)]
        names += [
            (f"{algo}{f' [{v}]' if v else ''}{f' {flags}' if flags else ''}{at}", algo, v, root, flags.split())
            for algo in args.algos
            for v in args.vector_envs
            for at, root, flags in runs
        ]
        results: dict[str, list[float]] = {name: [] for name, *_ in names}
        for round_ in range(args.rounds):
            for name, algo, vector_env, root, flags in names:
                if algo is None:
                    value = raw_env_steps_per_second(env_id, args.num_envs, args.raw_steps, vector_env, seed=round_)
                else:
                    kind = ["--vector-env", vector_env] if vector_env else []
                    value = training_sps(algo, args.env, args.total_timesteps, [*extra, *kind, *flags], root)
                results[name].append(value)
            print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()))

    first_training = [name for name, algo, *_ in names if algo is not None][:1]
    bases = list(dict.fromkeys([names[0][0], *first_training]))  # the raw env (where measured), the first training row
    envs = "" if continuous else f", {args.num_envs} envs"
    print(f"\n{args.env}{envs}, {args.rounds} rounds, extra flags: {args.extra or '-'}\n")
    print(
        f"| what | steps/s (median) | rounds | {' | '.join(f'ratio to {b}' for b in bases)} |\n|-|-|-|{'-|' * len(bases)}"
    )
    for name, values in results.items():
        median = statistics.median(values)
        ratios = " | ".join(f"{median / statistics.median(results[b]):.2f}" for b in bases)
        print(f"| {name} | {median:.0f} | {', '.join(f'{v:.0f}' for v in values)} | {ratios} |")


if __name__ == "__main__":
    main()
