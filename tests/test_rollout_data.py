"""What each discrete file's rollout hands its external model before the change, worked out here without the run's
code: the key-distance target of a transition is the distance to the red key in that transition's own view; the
forward model's target is the change of view that each env, replayed alone from its seed with the actions taken, makes
at that step, episode ends included. A target a step early or late, of another env, or taken from the view after a
reset, fails.

The file's main block runs as it does from the command line, in a forked child (tests/forked.py), with
`train_external_model` (or any of the file's functions or classes' methods, `Class.method`: `SPY`'s `functions`)
replaced by a spy that keeps, for each of its arguments, the tensor of the first call that passes one (so two
arguments may come from two calls), and then calls it."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.constants import COLOR_TO_IDX

from envs import OneHotFlatObs
from envs.views import flat_to_image, key_distance
from tests import forked

ROOT = Path(__file__).resolve().parents[1]

SPY = """
import importlib, inspect, sys
import numpy as np
sys.path.insert(0, {root!r})
module = importlib.import_module("algos.{name}")
source = open(module.__file__).read()
start = source.index('if __name__ == "__main__":')  # the main block, compiled at its own line numbers
main = "\\n" * source[:start].count("\\n") + source[start:].replace('if __name__ == "__main__":', "if True:", 1)
received = {{}}

def spying(function):
    owner, _, name = function.rpartition(".")
    holder = getattr(module, owner) if owner else module
    original = getattr(holder, name)
    signature = inspect.signature(original)

    def spy(*args, **named):
        kept = received.setdefault(function, {{}})  # each argument's first tensor, by its name
        for key, value in signature.bind(*args, **named).arguments.items():
            if hasattr(value, "numpy") and key not in kept:
                kept[key] = value.detach().numpy().copy()
        return original(*args, **named)

    if owner:  # a method: on its class, which the main block's instances use
        setattr(holder, name, spy)
    return spy

spies = {{f: spying(f) for f in {functions!r}}}
exec(compile(main, module.__file__, "exec"), dict(vars(module), **{{f: s for f, s in spies.items() if "." not in f}}))
np.savez({out!r}, **{{f"{{f}}.{{k}}": v for f, arrays in received.items() for k, v in arrays.items()}})
"""
FILES = [path.stem for path in (ROOT / "algos").glob("ppo*.py") if "continuous" not in path.stem]
OWN_FLAGS = {"ppo_poi_replay": ["--model-data", "rollout"]}  # the rollout its buffer takes, trained on directly
NUM_ENVS, NUM_STEPS, SEED = 2, 384, 3  # the first iteration, before the change, holds each env's truncation at 360


@pytest.mark.parametrize(
    "name, target", [(name, target) for name in sorted(FILES) for target in ("key_distance", "forward")]
)
def test_the_model_trains_on_each_observation_with_its_own_target(tmp_path, name, target):
    script = tmp_path / "spy.py"
    script.write_text(
        SPY.format(root=str(ROOT), name=name, functions=["train_external_model"], out=str(tmp_path / "received.npz"))
    )
    batch = NUM_ENVS * NUM_STEPS
    flags = ["--env", "ColorDoorKey-6x6", "--seed", SEED, "--num-envs", NUM_ENVS, "--num-steps", NUM_STEPS,
             "--num-minibatches", "2", "--total-timesteps", 2 * batch, "--change-steps", batch + 1, "--eval-every",
             "1000", "--eval-steps", "64", "--eval-changed-min", "0", "--model-target", target,
             "--runs-dir", tmp_path / "runs"]  # fmt: skip
    proc = forked.run([script, *flags, *OWN_FLAGS.get(name, [])], tmp_path)
    assert proc.returncode == 0, proc.stderr
    received = np.load(tmp_path / "received.npz")
    obs, targets = received["train_external_model.obs"], received["train_external_model.targets"]
    assert obs.shape == (NUM_ENVS * NUM_STEPS, 980) and len(targets) == len(obs)
    if target == "key_distance":  # the red key (the first phase's) in the observation's own view
        image = flat_to_image(obs)
        np.testing.assert_allclose(targets[:, 0], key_distance(image, np.full(len(obs), COLOR_TO_IDX["red"])))
        assert len(np.unique(targets)) > 1  # views with and without the key: the check can tell a shift
    else:  # each env replayed alone from its seed with the actions taken: the change of each step, episode ends too
        actions = received["train_external_model.actions"].reshape(NUM_STEPS, NUM_ENVS)
        for i in range(NUM_ENVS):
            env = OneHotFlatObs(gym.make("ColorDoorKey-6x6-v0"))
            env.unwrapped.set_correct_key_color("red")
            view, _ = env.reset(seed=SEED + i)  # a vector env seeds its envs seed, seed + 1, ...
            ends = 0
            for step in range(NUM_STEPS):
                row = step * NUM_ENVS + i
                np.testing.assert_array_equal(obs[row], view)
                next_view, _, terminated, truncated, _ = env.step(actions[step, i])
                np.testing.assert_array_equal(targets[row], next_view - view)
                ended = terminated or truncated
                ends += ended
                view = env.reset()[0] if ended else next_view  # the next world, as the vector env's autoreset
            assert ends >= 1  # the truncation at step 360 at least: a target from the new world's view fails
