"""What each file's rollout hands its external model, worked out here without the env's info: the key-distance
target of a transition is the distance to the red key in that transition's own view; the forward model's target is
the change to the rollout's next observation where the episode goes on, and to a whole final view (not the next
world's first) where it ended. A target a step early or late, or taken from the view after a reset, fails.

The file's main block runs as it does from the command line, in a forked child (tests/forked.py), with
`train_external_model` replaced by a spy that keeps what the first call receives and then trains as the file does."""

from pathlib import Path

import numpy as np
import pytest
from minigrid.core.constants import COLOR_TO_IDX

from envs.views import key_distance
from tests import forked

ROOT = Path(__file__).resolve().parents[1]

SPY = """
import importlib, sys
import numpy as np
sys.path.insert(0, {root!r})
module = importlib.import_module("algos.{name}")
source = open(module.__file__).read()
main = source[source.index('if __name__ == "__main__":'):].replace('if __name__ == "__main__":', "if True:", 1)
received = []

def spy(model, optimizer, obs, actions, targets, *rest, **named):
    if not received:
        received.append({{"obs": obs.numpy().copy(), "actions": actions.numpy().copy(), "targets": targets.numpy().copy()}})
    return module.train_external_model(model, optimizer, obs, actions, targets, *rest, **named)

exec(compile(main, module.__file__, "exec"), dict(vars(module), train_external_model=spy))
np.savez({out!r}, **received[0])
"""
NUM_ENVS, NUM_STEPS = 2, 384  # the first iteration, before the change, holds each env's truncation at step 360


@pytest.mark.parametrize(
    "name, target",
    [("ppo", "key_distance"), ("ppo", "forward")]
    + [(name, "key_distance") for name in ("ppo_poi_ensemble", "ppo_poi_policy", "ppo_poi_progress", "ppo_poi_diayn")],
)
def test_the_model_trains_on_each_observation_with_its_own_target(tmp_path, name, target):
    script = tmp_path / "spy.py"
    script.write_text(SPY.format(root=str(ROOT), name=name, out=str(tmp_path / "received.npz")))
    flags = ["--env", "ColorDoorKey-6x6", "--seed", "3", "--num-envs", NUM_ENVS, "--num-steps", NUM_STEPS,
             "--num-minibatches", "2", "--total-timesteps", 2 * NUM_ENVS * NUM_STEPS, "--change-steps", NUM_ENVS * NUM_STEPS + 1,
             "--eval-every", "1", "--eval-steps", "64", "--model-target", target, "--runs-dir", tmp_path / "runs"]  # fmt: skip
    proc = forked.run([script, *flags], tmp_path)
    assert proc.returncode == 0, proc.stderr
    received = np.load(tmp_path / "received.npz")
    obs, targets = received["obs"], received["targets"]
    assert obs.shape == (NUM_ENVS * NUM_STEPS, 980) and len(targets) == len(obs)
    if target == "key_distance":  # the red key (the first phase's) in the observation's own view
        view = obs.reshape(-1, 7, 7, 20)
        image = np.stack([view[..., :11].argmax(-1), view[..., 11:17].argmax(-1), view[..., 17:].argmax(-1)], -1)
        np.testing.assert_allclose(targets[:, 0], key_distance(image, np.full(len(obs), COLOR_TO_IDX["red"])))
        assert len(np.unique(targets)) > 1  # views with and without the key: the check can tell a shift
    else:  # where the episode goes on, the next observation of the rollout is the one the change leads to
        steps = obs.reshape(NUM_STEPS, NUM_ENVS, -1)
        change = targets.reshape(NUM_STEPS, NUM_ENVS, -1)
        went_on = (steps[1:] - steps[:-1] == change[:-1]).all(-1)
        assert went_on.mean() > 0.99 and (np.abs(change).sum(-1) > 0).mean() > 0.25  # a random agent's view moves
        ended = steps[:-1][~went_on] + change[:-1][~went_on]  # the final view of an episode, not the new world's
        assert len(ended) >= NUM_ENVS  # each env's truncation at step 360, at least
        assert np.isin(ended, [0.0, 1.0]).all() and (ended.sum(-1) == 147).all()  # a view: 49 cells, 3 one-hots
