"""Every algorithm file's reference run, which several tests read (the `shared_run` fixture in conftest.py runs it
once per test process): test_checkpoint resumes its interrupted twin against it, test_smoke checks that evaluating
seldom trains the same run, that the POI files log what they should, that the minigrid vector env gives the same run,
that a fresh process with the same seed gives it again; test_replay compares its variants with it; test_continuous
reads the continuous files' runs on a world that changes.

A discrete file's: 2 worlds x 64 steps an iteration, 7 iterations, the change within the third (test_checkpoint's
interrupted twin stops after the fifth), the held-out evaluation every iteration; the interest counts from the start
(--int-after-return 0), so that it reaches the update."""

import pytest

DISCRETE = (
    "--num-envs 2 --num-steps 64 --num-minibatches 2 --eval-steps 64 --eval-every 1 --env ColorDoorKey-6x6 "
    "--model-target key_distance --vector-env batched --total-timesteps 896 --change-steps 320"
).split()
FROM_START = DISCRETE + ["--int-after-return", "0"]  # the interest counts from the first update
FLAGS = {
    "ppo.py": DISCRETE,
    # the forward model, Gaussian and faithful (the forward-model study's G1): its held-out NLL and its optimiser
    "ppo.py --model-target forward": [f if f != "key_distance" else "forward" for f in DISCRETE]
    + ["--model-gaussian", "--model-faithful"],
    "ppo_poi_ensemble.py": FROM_START,
    "ppo_poi_disagreement.py": FROM_START,
    "ppo_poi_grad.py": FROM_START,
    # the progress file's variants with state of their own: its lagged copy, its generator, its snapshots, the
    # model's variance, its buffer
    "ppo_poi_progress.py": FROM_START + "--interest progress".split(),
    "ppo_poi_progress.py --interest noise": FROM_START + "--interest noise".split(),
    "ppo_poi_progress.py --progress-lag": FROM_START + "--interest progress --progress-lag 2".split(),
    "ppo_poi_progress.py --interest excess": FROM_START + "--interest excess --model-gaussian".split(),
    "ppo_poi_progress.py --model-data uniform": FROM_START
    + "--interest error --model-data uniform --replay-size 256".split(),
    "ppo_poi_policy.py": FROM_START,
    "ppo_poi_replay.py": DISCRETE + ["--replay-size", "256"],
    # its draw counts, kept past the iteration after resume
    "ppo_poi_replay.py --model-data curious": DISCRETE + "--replay-size 384 --model-data curious".split(),
    # each episode's skill for its first 24 steps, then none: rollouts without a step with a skill, on both sides of
    # the checkpoint
    "ppo_poi_diayn.py": DISCRETE + ["--skill-steps", "24"],
    # a new skill every 24 steps: a skill ends mid-rollout and across the checkpoint
    "ppo_poi_diayn.py --no-skill-then-task": DISCRETE + ["--skill-steps", "24", "--no-skill-then-task"],
    "ppo_poi_emb.py": FROM_START,
    # the continuous files on a world that changes: PPO's changes in the first iteration (its checkpoint is in phase 1)
    # and after the fourth, 256 held-out steps
    "ppo_continuous_poi_ensemble.py": (
        "--num-envs 2 --num-steps 64 --num-minibatches 2 --total-timesteps 768 --env PendulumMotorChange-v1 "
        "--change-steps 100 500 --eval-steps 256"
    ).split(),
    # SAC logs (and checkpoints) every 1,000 steps: its updates from step 1,800, the checkpoint at 2,000, a change
    # before it and one after (its motor from the reset at 2,200); the model's error as interest: its rewards and the
    # buffer's worlds across the checkpoint, read by the shares of an earlier world logged at 2,400 (the buffer's noise
    # is drawn, but nothing reads it under this interest)
    "sac_forward_model.py": (
        "--total-timesteps 2400 --learning-starts 1800 --checkpoint-every 1000 --batch-size 64 --fm-hidden-size 64 "
        "--env PendulumMotorChange-v1 --change-steps 1500 2100 --fm-retrain-every 100 --eval-steps 256 --int-coef 0.1"
    ).split(),
}


def reference(key):
    """The script (relative to the repository) and the flags of the reference run named `key` (a key of FLAGS)."""
    return f"algos/{key.split()[0]}", FLAGS[key]


def group(key):
    """The xdist group of the tests that read the reference run `key`: `-n 2 --dist loadgroup` (pytest.ini) sends them
    to one test process, which makes the run once."""
    return pytest.mark.xdist_group(f"reference {key}")


def by_reference(keys, marks=()):
    """Parameters of a test that reads the reference runs named `keys`, each in its run's group."""
    return [pytest.param(key, marks=[group(key), *marks]) for key in keys]
