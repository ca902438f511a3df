"""Saved agents: the exported policy acts as the agent does, and `common.evaluate` runs it."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from common.evaluate import POLICY, draw_condition, draw_noise, evaluate, main, save_policy
from tests import forked

ROOT = Path(__file__).resolve().parents[1]


def load(run_dir):
    return torch.export.load(run_dir / POLICY).module()


def test_the_exported_discrete_policy_samples_the_agents_action_distribution(tmp_path):
    from algos.ppo import Agent

    torch.manual_seed(0)
    agent = Agent(980, 7)
    with torch.no_grad():  # a policy far from uniform, so that the counts can tell
        agent.actor[-1].weight.mul_(300)
    save_policy(
        tmp_path, agent, 980, dict(env="ColorDoorKey-6x6", observation="one_hot_view", noise="gumbel", noise_size=7)
    )
    policy = load(tmp_path)
    obs = (torch.rand(1, 980) < 0.15).float()
    probs = torch.softmax(agent.actor(obs), -1)[0].detach()
    assert policy(obs, torch.zeros(1, 7), torch.zeros(1, 0)).item() == probs.argmax().item()
    generator, meta = torch.Generator().manual_seed(1), dict(noise="gumbel", noise_size=7)
    n = 20000
    counts = torch.bincount(
        torch.cat([policy(obs, draw_noise(meta, generator), torch.zeros(1, 0)) for _ in range(n)]), minlength=7
    )
    sd = (probs * (1 - probs) / n).sqrt()
    assert 2 / 7 < probs.max() < 0.9 and ((counts / n - probs).abs() <= 5 * sd + 1e-3).all(), (counts / n, probs)


def test_a_skill_conditioned_policy_sees_the_observation_and_the_skill(tmp_path):
    """The evaluation feeds the policy what the training loop fed it: the view and the skill,
    one-hot times the run's scale."""
    from algos.ppo_poi_diayn import Agent, agent_input

    agent, scale = Agent(980 + 8, 7), 147**0.5
    meta = dict(
        env="ColorDoorKey-6x6",
        observation="one_hot_view",
        noise="gumbel",
        noise_size=7,
        condition=dict(kind="one_hot", probs=[1 / 8] * 8, scale=scale),
    )
    save_policy(tmp_path, agent, 980, meta)
    policy, obs = load(tmp_path), (torch.rand(4, 980) < 0.15).float()
    for skill in range(8):
        skills = torch.full((1,), skill)
        only_this = dict(meta, condition=dict(meta["condition"], probs=[float(k == skill) for k in range(8)]))
        condition = draw_condition(only_this, torch.Generator().manual_seed(0))
        for row in obs:
            expected = agent.actor(agent_input(row[None], skills, 8, scale)).argmax(-1)
            assert torch.equal(policy(row[None], torch.zeros(1, 7), condition), expected)


@pytest.mark.parametrize("then_task", [False, True])
def test_a_skill_ends_in_the_evaluation_where_it_ends_in_training(then_task):
    """A skill of `steps` 3 is held for 3 steps, then replaced by a new draw (age 0 again), or with `then_task` by a
    zero input to the episode's end; without `steps` (a file that keeps one per episode) it is never replaced."""
    from common.evaluate import next_condition

    spec = dict(kind="one_hot", probs=[0.5, 0.5], scale=2.0, steps=3, then_task=then_task)
    meta, generator = dict(condition=spec), torch.Generator().manual_seed(0)
    condition, age, seen = draw_condition(meta, generator), 0, []
    for _ in range(8):
        seen.append((condition, age))
        condition, age = next_condition(meta, condition, age + 1, generator)
    ages = [a for _, a in seen]
    assert ages == ([0, 1, 2, 3, 4, 5, 6, 7] if then_task else [0, 1, 2, 0, 1, 2, 0, 1])
    for c, a in seen:
        assert torch.equal(c, torch.zeros(1, 2)) == (then_task and a >= 3)
        assert then_task and a >= 3 or c.sum() == 2.0  # a skill: one-hot times the scale
    fixed = dict(condition=dict(spec, steps=0))
    assert next_condition(fixed, seen[0][0], 1000, generator) == (seen[0][0], 1000)
    assert next_condition(dict(), torch.zeros(1, 0), 5, generator)[1] == 5  # no condition at all


def test_a_saved_then_task_agent_is_evaluated_with_its_skill_for_each_episode_s_first_steps_only(tmp_path, monkeypatch):
    """A run with --skill-then-task (the default) saved with --save-model records when its skills end, and
    common.evaluate feeds the policy each episode's skill for its first --skill-steps steps and a zero input after them
    (a policy that records what it is fed stands in for the exported one)."""
    from tests.test_smoke import only_run_dir, run

    flags = ["--env", "ColorDoorKey-6x6", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2"]
    flags += ["--eval-steps", "64", "--total-timesteps", "128", "--skill-steps", "5"]
    run(tmp_path, *flags, "--save-model", script="algos/ppo_poi_diayn.py")
    run_dir = only_run_dir(tmp_path)
    spec = json.loads((run_dir / "policy.json").read_text())["condition"]
    assert spec["steps"] == 5 and spec["then_task"] is True and len(spec["probs"]) == 8
    fed = []

    class Recorder:  # turns left, so each episode runs to the step limit
        def __init__(self, program):
            self.program = program

        def __getattr__(self, name):  # the program's inputs, which common.evaluate checks before the episodes
            return getattr(self.program, name)

        def module(self):
            return self

        def __call__(self, obs, noise, condition):
            fed.append(condition.clone())
            return torch.zeros(1, dtype=torch.long)

    load = torch.export.load
    monkeypatch.setattr(torch.export, "load", lambda path: Recorder(load(path)))
    lengths = evaluate(run_dir, episodes=2)["lengths"]
    assert sum(lengths) == len(fed) and min(lengths) > 5
    for start, length in zip((0, lengths[0]), lengths):
        episode = fed[start : start + length]
        assert all(torch.allclose(c.sum(), torch.tensor(spec["scale"])) for c in episode[:5])  # one skill, scaled
        assert all(torch.equal(c, episode[0]) for c in episode[:5])
        assert all(torch.equal(c, torch.zeros_like(c)) for c in episode[5:])


def test_the_continuous_policies_give_the_mean_without_noise_and_mean_plus_std_noise_with_it(tmp_path):
    import gymnasium as gym

    from algos.ppo_continuous_poi_ensemble import Agent
    from algos.sac_forward_model import Actor

    agent, x, noise = Agent(3, 2), torch.randn(1, 3), torch.randn(1, 2)
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([[0.3, 2.0]]).log())  # stds other than 1, one per dimension
    save_policy(tmp_path, agent, 3, dict(env="Pendulum-v1", observation="raw", noise="normal", noise_size=2))
    policy = load(tmp_path)
    torch.testing.assert_close(policy(x, torch.zeros(1, 2), torch.zeros(1, 0)), agent.actor_mean(x))
    torch.testing.assert_close(
        policy(x, noise, torch.zeros(1, 0)), agent.actor_mean(x) + torch.tensor([[0.3, 2.0]]) * noise
    )

    actor = Actor(3, gym.spaces.Box(np.float32([-2.0, 0.0]), np.float32([2.0, 1.0])))  # scales 2 and 0.5, biases 0, 0.5
    save_policy(tmp_path, actor, 3, dict(env="Pendulum-v1", observation="raw", noise="normal", noise_size=2))
    policy = load(tmp_path)
    _, _, mean_action = actor.get_action(x)  # the squashed mean, as SAC evaluates
    torch.testing.assert_close(policy(x, torch.zeros(1, 2), torch.zeros(1, 0)), mean_action)
    torch.manual_seed(5)
    sampled, _, _ = actor.get_action(x)  # training's sampler draws its noise as torch.randn of the mean's shape
    torch.manual_seed(5)
    torch.testing.assert_close(policy(x, torch.randn(1, 2), torch.zeros(1, 0)), sampled)


def test_the_evaluation_env_opens_to_the_runs_last_colour_or_the_one_asked():
    """A ColorDoorKey run is evaluated in the world its policy last trained in (the saved meta's correct colour, the
    last phase's), or in the one --key-color names."""
    from common.evaluate import make_eval_env

    meta = dict(env="ColorDoorKey-6x6", observation="one_hot_view", correct_key_color="blue")
    for key_color, expected in ((None, "blue"), ("red", "red")):
        env = make_eval_env(meta, key_color, render=False)
        env.reset(seed=0)
        assert env.unwrapped.correct_key_color == expected
        env.close()


@pytest.mark.parametrize("env_name", ["MiniGrid-Empty-5x5-v0", "ColorDoorKey-6x6"])
def test_evaluate_runs_a_saved_run_and_matches_a_plain_loop(tmp_path, monkeypatch, env_name):
    """A short ppo.py run saved with --save-model; evaluate (deterministic) against a loop
    written here with the agent loaded from agent.pt: the same returns and lengths, and at every step the exported
    policy got the loop's observation and gave its action (this barely trained agent never reaches the goal, so
    returns and lengths alone would not tell a policy fed the wrong observation). On ColorDoorKey each episode's
    layout is its seed's (seed + episode); the door's colour is not read here (the agent never reaches it)."""
    import gymnasium as gym

    from algos.ppo import Agent
    from envs import OneHotFlatObs, resolve_env_id, view_columns

    cmd = [
        str(ROOT / "algos/ppo.py"),
        "--runs-dir",
        str(tmp_path / "runs"),
        "--env",
        env_name,
        "--num-envs",
        "2",
        "--num-steps",
        "64",
        "--num-minibatches",
        "2",
        "--total-timesteps",
        "256",
        "--eval-steps",
        "64",
        "--save-model",
    ]
    assert forked.run(cmd, tmp_path).returncode == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    fed, load = [], torch.export.load  # each observation the exported policy gets, and the action it gives

    class Recorded:
        def __init__(self, program):
            self.program = program

        def __getattr__(self, name):  # the program's inputs, which common.evaluate checks before the episodes
            return getattr(self.program, name)

        def module(self):
            policy = self.program.module()

            def recorded(obs, noise, condition):
                action = policy(obs, noise, condition)
                fed.append((obs.clone(), action.clone()))
                return action

            return recorded

    monkeypatch.setattr(torch.export, "load", lambda path: Recorded(load(path)))
    result = evaluate(run_dir, episodes=3, deterministic=True, seed=5)
    env_id = resolve_env_id(env_name)
    agent = Agent(980, 7, columns=view_columns(env_id))
    agent.load_state_dict(torch.load(run_dir / "agent.pt"))
    env = OneHotFlatObs(gym.make(env_id))
    if env_name.startswith("ColorDoorKey"):
        env.unwrapped.set_correct_key_color("blue")
    step, first_views = 0, []
    for episode in range(3):
        obs, _ = env.reset(seed=5 + episode)
        first_views.append(obs)
        total, length, done = 0.0, 0, False
        while not done:
            x = torch.as_tensor(obs)[None]
            kept = x if agent.columns is None else x[:, agent.columns]  # the view's columns the first layer reads
            action = agent.actor(kept).argmax(-1).item()
            assert torch.equal(fed[step][0], x) and fed[step][1].item() == action, step
            obs, reward, terminated, truncated, _ = env.step(action)
            total, length, done, step = total + float(reward), length + 1, terminated or truncated, step + 1
        assert (result["returns"][episode], result["lengths"][episode]) == (pytest.approx(total), length)
    assert step == len(fed)
    if env_name.startswith("ColorDoorKey"):  # the layouts differ, so a wrong episode seed shows
        assert len(np.unique(np.array(first_views), axis=0)) == 3
        assert json.loads((run_dir / "policy.json").read_text())["correct_key_color"] == "blue"  # its last phase's
        return

    cli = forked.run(["-m", "common.evaluate", run_dir, "--episodes", "2", "--json", tmp_path / "e.json"], ROOT)
    assert cli.returncode == 0 and "2 episodes, return" in cli.stdout, cli.stderr
    assert len(json.loads((tmp_path / "e.json").read_text())["returns"]) == 2
    other = forked.run(["-m", "common.evaluate", run_dir, "--key-color", "blue"], ROOT)  # not a ColorDoorKey run
    assert other.returncode == 1 and other.stderr.strip() == "error: --key-color needs a ColorDoorKey run"


@pytest.mark.parametrize(
    "folder, flags, message, fresh",
    [
        (".", [], "no policy.pt2", True),  # the command line in a fresh interpreter; the others forked
        (".", ["--episodes", "0"], "--episodes must be positive", False),
        ("nope", [], "error: no run folder {tmp_path}/nope", False),
        ("damaged", [], "error: {tmp_path}/damaged/policy.json cannot be read (Expecting", False),
        ("damaged", ["--seed", "-1"], "error: --seed must be 0 or more, got -1", False),
        ("damaged", ["--json", "no/e.json"], "error: --json no/e.json: its folder does not exist", False),
        ("damaged", ["--json", "."], "error: --json . is a folder; it names the file to write", False),
        ("archive", [], "error: {tmp_path}/archive/policy.pt2 cannot be read (", False),
        ("partial", [], "error: {tmp_path}/partial/policy.json lacks or mistypes noise, noise_size", False),
        ("list", [], "error: {tmp_path}/list/policy.json is not a policy's description (a JSON object)", False),
        ("cauchy", [], "error: {tmp_path}/cauchy/policy.json: noise is 'cauchy', not one of gumbel, normal", False),
        ("skills", [], "error: {tmp_path}/skills/policy.json: condition is neither a one_hot with probs nor", False),
        ("nowhere", [], "error: {tmp_path}/nowhere/policy.json: its env cannot be made (Environment `Nope`", False),
        ("unknown", [], "error: unknown env 'Nope'; known names: ColorDoorKey", False),
    ],
)
def test_evaluate_rejects_bad_input_with_one_line(tmp_path, folder, flags, message, fresh):
    """A damaged archive or description, or one a hand has edited, is one line naming the file, before any episode."""
    whole = {"env": "ColorDoorKey-6x6", "observation": "one_hot_view", "noise": "gumbel", "noise_size": 7}
    for damaged, meta in (
        ("damaged", "{not json"),
        ("archive", json.dumps(whole)),
        ("partial", '{"env": "ColorDoorKey-6x6", "observation": "one_hot_view"}'),
        ("list", "[1, 2]"),
        ("cauchy", json.dumps({**whole, "noise": "cauchy"})),
        ("skills", json.dumps({**whole, "condition": {"kind": "one_hot", "size": 8}})),
        ("nowhere", json.dumps({**whole, "env": "Nope-v9", "observation": "raw", "noise": "normal"})),
        ("unknown", json.dumps({**whole, "env": "Nope"})),
    ):
        (tmp_path / damaged).mkdir()
        (tmp_path / damaged / "policy.pt2").write_bytes(b"PK\x03\x04 cut short")
        (tmp_path / damaged / "policy.json").write_text(meta)
    cli = forked.run(["-m", "common.evaluate", tmp_path / folder, *flags], ROOT, timeout=60, fresh=fresh)
    lines = cli.stderr.strip().splitlines()
    assert cli.returncode == 1 and len(lines) == 1 and message.format(tmp_path=tmp_path) in lines[0], cli.stderr


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"noise_size": 5}, "policy.json does not fit policy.pt2: noise of size 5 (it takes 7)"),
        ({"noise_size": -1}, "policy.json: noise_size is -1, not a positive size"),
        (
            {"condition": {"kind": "unit_vector", "size": 4}},
            "does not fit policy.pt2: condition of size 4 (it takes 0)",
        ),
        ({"condition": {"kind": "one_hot", "probs": ["a"]}}, "policy.json does not fit its env ("),
        ({"env": "MiniGrid-Empty-5x5-v0"}, "MiniGrid-Empty-5x5-v0 has no key colours to set (correct_key_color 'red')"),
        ({"obs_dim": 147}, "does not fit policy.pt2: obs of size 980 (it takes 147)"),  # a policy of another view
    ],
)
def test_a_description_that_does_not_fit_its_policy_is_one_line_before_any_episode(tmp_path, edit, message):
    """A real exported policy whose policy.json a hand has edited (or another policy under it): a size, a
    condition or an env that does not fit is one line naming the file (or the env), exit 1, before any episode."""
    from algos.ppo import Agent

    meta = dict(
        env="ColorDoorKey-6x6", observation="one_hot_view", noise="gumbel", noise_size=7, correct_key_color="red"
    )
    obs_dim = edit.pop("obs_dim", 980)
    save_policy(tmp_path, Agent(obs_dim, 7), obs_dim, meta)
    if obs_dim == 980:
        assert main([str(tmp_path), "--episodes", "1"]) == 0  # as saved, it runs
    (tmp_path / "policy.json").write_text(json.dumps({**meta, **edit}))
    cli = forked.run(["-m", "common.evaluate", tmp_path, "--episodes", "1"], ROOT, timeout=60)
    lines = cli.stderr.strip().splitlines()
    assert cli.returncode == 1 and len(lines) == 1 and message in lines[0], cli.stderr
