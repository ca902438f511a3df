"""Where the interest goes (common/interest_by_action.py): the kind of each transition, read from the views,
against hand-worked cases and against the MiniGrid world's own state, on both ColorDoorKey implementations;
the per-rollout means; the per-phase means, the figure and the table from event files and from a series."""

import numpy as np
import pytest
import torch
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.core.world_object import Key
from torch.utils.tensorboard import SummaryWriter

from common import analyze, series
from common.runs import COMPLETION_MARKER
from common.interest_by_action import KINDS, TAG, log_interest_by_action, main, phase_means, transition_kinds
from envs import BatchedColorDoorKey, ColorDoorKeyEnv, OneHotFlatObs, true_next_obs
from tests.test_batched_env import minigrid_vector
from tests.test_env import stand_before_door
from tests.test_heldout import RecordingWriter

LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)


def kind_of(obs, action, next_obs):
    return KINDS[transition_kinds(torch.tensor(obs)[None], torch.tensor([action]), torch.tensor(next_obs)[None])]


def minigrid_transition(carrying, action, at_door=True):
    """(view, action, next view) of ColorDoorKey-6x6 (blue opens the door) from the agent left of the door facing it,
    carrying `carrying` (a colour or None), or in the top-left corner facing the wall above it."""
    env = OneHotFlatObs(ColorDoorKeyEnv(size=6, correct_key_color="blue"))
    env.reset(seed=0)
    stand_before_door(env, None if carrying is None else Key(carrying))
    if not at_door:
        env.unwrapped.agent_pos, env.unwrapped.agent_dir = (1, 1), 3
    obs, *_ = env.step(DONE)  # the view of the state set by hand (done changes nothing)
    return obs, action, env.step(action)[0]


def batched_transition(carrying, action, at_door=True):
    """The same as `minigrid_transition`, the state set by hand in the batched env's arrays."""
    env = BatchedColorDoorKey(1, size=6, correct_key_color="blue")
    env.reset(seed=0)
    (x, y), *_ = np.argwhere(env.obj[0] == OBJECT_TO_IDX["door"])
    env.obj[0, x - 1, y], env.color[0, x - 1, y] = OBJECT_TO_IDX["empty"], 0
    env.pos[0], env.dir[0] = ((x - 1, y), 0) if at_door else ((1, 1), 3)
    if carrying is not None:
        env.carry_obj[0], env.carry_color[0] = OBJECT_TO_IDX["key"], COLOR_TO_IDX[carrying]
    obs = env.step([DONE])[0][0]
    return obs, action, env.step([action])[0][0]


@pytest.mark.parametrize("transition", [minigrid_transition, batched_transition])
def test_hand_worked_transitions_on_both_envs(transition):
    assert kind_of(*transition("blue", TOGGLE)) == "toggle_opens"  # the correct key opens the locked door
    assert kind_of(*transition("red", TOGGLE)) == "toggle_wrong_key"  # the door's own colour, the wrong key
    assert kind_of(*transition(None, TOGGLE)) == "toggle_other"  # a locked door, no key
    assert kind_of(*transition("blue", TOGGLE, at_door=False)) == "toggle_other"  # facing a wall
    assert kind_of(*transition("blue", FORWARD)) == "forward"  # into the locked door: blocked
    assert kind_of(*transition(None, FORWARD, at_door=False)) == "forward"  # into the wall
    obs, _, next_obs = transition(None, FORWARD, at_door=False)
    assert np.array_equal(obs, next_obs)  # it did not move
    for action, kind in [(LEFT, "turn"), (RIGHT, "turn"), (PICKUP, "pickup"), (DROP, "drop"), (DONE, "done")]:
        assert kind_of(*transition("red", action)) == kind
    assert np.array_equal(minigrid_transition("red", TOGGLE)[2], batched_transition("red", TOGGLE)[2])


def world_kind(env, action, locked_before, carried_key, door):
    """The kind of a step from the MiniGrid world's objects (not the view): a reference written differently."""
    if action == TOGGLE:
        if locked_before and door.is_open:
            return "toggle_opens"
        return "toggle_wrong_key" if locked_before and carried_key else "toggle_other"
    return {LEFT: "turn", RIGHT: "turn", FORWARD: "forward", PICKUP: "pickup", DROP: "drop", DONE: "done"}[action]


def test_random_episodes_classify_as_the_worlds_state_says_on_both_envs():
    """Both envs step alike; the kinds from their views, episode ends included (the true next views), are
    those of the MiniGrid world. Many short episodes on 6x6 with a policy that favours pick-ups and toggles."""
    ref, batched = minigrid_vector(16, 6, max_steps=40), BatchedColorDoorKey(16, 6, max_steps=40)
    ref_obs, _ = ref.reset(seed=1)
    obs, _ = batched.reset(seed=1)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(200):
        actions = rng.choice(7, size=16, p=[0.2, 0.2, 0.25, 0.1, 0.05, 0.15, 0.05])
        before = []
        for env in (e.unwrapped for e in ref.envs):
            front = env.grid.get(*env.front_pos)
            locked = front is not None and front.type == "door" and front.is_locked
            before.append((locked, isinstance(env.carrying, Key), front))
        ref_next, _, terminated, truncated, ref_infos = ref.step(actions)
        next_obs, _, _, _, infos = batched.step(actions)
        done = terminated | truncated
        ref_true, true = true_next_obs(ref_next, ref_infos, done), true_next_obs(next_obs, infos, done)
        assert np.array_equal(ref_true, true)
        expected = [world_kind(env, a, *b) for env, a, b in zip(ref.envs, actions, before)]
        for views, next_views in ((ref_obs, ref_true), (obs, true)):
            kinds = transition_kinds(torch.tensor(views), torch.tensor(actions), torch.tensor(next_views))
            assert [KINDS[k] for k in kinds] == expected
        seen |= set(expected)
        ref_obs, obs = ref_next, next_obs
    assert seen == set(KINDS) - {"toggle_opens"}  # a door opens about twice in 6,400 such steps: the test above


def test_the_rollout_mean_of_each_kind_it_holds():
    actions = torch.tensor([[LEFT, FORWARD, TOGGLE], [RIGHT, DONE, FORWARD]])  # (steps, envs)
    poi = torch.tensor([[1.0, 2.0, 3.0], [5.0, 7.0, 4.0]])
    views = torch.zeros(2, 3, 980)  # nothing in front: the toggle is `toggle_other`
    writer = RecordingWriter()
    log_interest_by_action(writer, 512, poi, views, actions, views)
    assert writer.scalars == {
        TAG + "turn": (3.0, 512),
        TAG + "forward": (3.0, 512),
        TAG + "toggle_other": (3.0, 512),
        TAG + "done": (7.0, 512),
    }


def write_run(folder, seed, turn_before, turn_after):
    """A run of 2 phases of 20 rollouts 10,000 steps apart (change at step 200,000) logging the turns' and every
    transition's mean, and opened doors only after the change: 4 over its first 100k steps, 8 over its last. The
    turns before the change: `turn_before` - 1 over the first 100k steps, + 1 over the last."""
    run_dir = folder / f"ColorDoorKey-6x6__ppo_poi_grad__{seed}__{1000 + seed}"
    writer = SummaryWriter(str(run_dir))
    for i in range(1, 41):
        step, after = 10_000 * i, i > 20
        writer.add_scalar("charts/phase", float(after), step)
        writer.add_scalar(TAG + "turn", turn_after if after else turn_before + (1 if i > 10 else -1), step)
        writer.add_scalar("poi/mean", 1.0, step)
        if after:
            writer.add_scalar(TAG + "toggle_opens", 8.0 if i > 30 else 4.0, step)
    writer.close()
    (run_dir / COMPLETION_MARKER).write_text("{}")  # finished: a series keeps it


def test_phase_means_the_figure_and_the_table_from_event_files_and_from_a_series(tmp_path, capsys):
    for seed, before, after in [(1, 2.0, 3.0), (2, 4.0, 5.0), (3, 6.0, 7.0)]:
        write_run(tmp_path / "sweep", seed, before, after)
    (run, *_), _ = analyze.find_runs([tmp_path / "sweep"])
    scalars = analyze.read_scalars(run.path)
    assert phase_means(scalars, 0) == [{"turn": 2.0, "all": 1.0}, {"turn": 3.0, "toggle_opens": 6.0, "all": 1.0}]
    assert phase_means(scalars)[1]["toggle_opens"] == 8.0  # the phase's last 100k steps
    assert phase_means(scalars, 20_000)[0]["turn"] == phase_means(scalars)[0]["turn"] == 3.0  # each phase's window
    assert main([str(tmp_path / "sweep"), "--window", "0", "--out", str(tmp_path / "fig.png")]) == 0
    table = capsys.readouterr().out
    assert "| ppo_poi_grad | turn | 4 [2, 6] (3) | 5 [3, 7] (3) |" in table
    assert "| ppo_poi_grad | toggle_opens | - | 6 [6, 6] (3) |" in table
    assert "| ppo_poi_grad | all | 1 [1, 1] (3) | 1 [1, 1] (3) |" in table and "pickup" not in table
    assert (tmp_path / "fig.png").stat().st_size > 10_000

    runs, _ = analyze.find_runs([tmp_path / "sweep"])
    series.write([series.record(r, analyze.read_scalars(r.path)) for r in runs], tmp_path / "s.jsonl.gz")
    assert main([str(tmp_path / "s.jsonl.gz"), "--out", str(tmp_path / "from_series.png")]) == 0
    from_series = capsys.readouterr().out
    assert main([str(tmp_path / "sweep"), "--out", str(tmp_path / "fig.png")]) == 0  # the default window, 100k
    assert capsys.readouterr().out.split("\n\n")[0] == from_series.split("\n\n")[0]
    assert main([str(tmp_path / "s.jsonl.gz"), "--window", "0", "--out", str(tmp_path / "whole.png")]) == 0
    whole_from_series = capsys.readouterr().out.split("\n\n")[0]
    assert "| ppo_poi_grad | toggle_opens | - | 8 [8, 8] (3) |" in from_series  # the last 100k steps
    assert main([str(tmp_path / "sweep"), "--window", "0", "--out", str(tmp_path / "whole.png")]) == 0
    assert capsys.readouterr().out.split("\n\n")[0] == whole_from_series  # the whole phases, from the series alone
    assert "| ppo_poi_grad | toggle_opens | - | 6 [6, 6] (3) |" in whole_from_series  # 4 then 8: the whole phase's 6
    assert series.main([str(tmp_path / "s.jsonl.gz"), "--out", str(tmp_path / "merged.jsonl.gz")]) == 0  # kept
    assert "3 finished runs" in capsys.readouterr().out
    assert main([str(tmp_path / "merged.jsonl.gz"), "--window", "0", "--out", str(tmp_path / "whole.png")]) == 0
    assert capsys.readouterr().out.split("\n\n")[0] == whole_from_series
    assert main([str(tmp_path / "s.jsonl.gz"), "--window", "5000", "--out", str(tmp_path / "x.png")]) == 1
    assert "--window 5000: a series keeps the means of --window 100000 and 0 only" in capsys.readouterr().err
    records = list(series.read(tmp_path / "s.jsonl.gz"))  # a series written before whole phases were kept
    for rec in records:
        for phase in rec["phases"]:
            del phase["interest_by_action_whole"]
    series.write(records, tmp_path / "old.jsonl.gz")
    assert main([str(tmp_path / "old.jsonl.gz"), "--window", "0", "--out", str(tmp_path / "x.png")]) == 1
    assert "its series was written before whole phases were kept" in capsys.readouterr().err


def test_a_series_of_a_run_without_the_kinds_is_as_before(tmp_path):
    run_dir = tmp_path / "ColorDoorKey-6x6__ppo__1__1000"
    writer = SummaryWriter(str(run_dir))
    for step in (1000, 2000):
        writer.add_scalar("charts/phase", 0.0, step)
        writer.add_scalar("poi/mean", 1.0, step)
    writer.close()
    (run,), _ = analyze.find_runs([tmp_path])
    assert phase_means(analyze.read_scalars(run.path)) == [{}]
    assert set(series.record(run, analyze.read_scalars(run.path))["phases"][0]) == {  # no interest keys
        "start",
        "last_100_episodes",
        "solved_at",
    }
    assert main([str(tmp_path), "--out", str(tmp_path / "fig.png")]) == 1
