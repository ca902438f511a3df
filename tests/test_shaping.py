"""Behaviour shaping by interest: the DIAYN discriminator, the POI-guided skill sampler, the
state sampler's VAE, the interest embedding; smoke runs of both files."""

import importlib

import gymnasium as gym
import numpy as np
import pytest
import torch

from algos import ppo_poi_diayn as diayn
from algos import ppo_poi_disagreement as disagreement
from algos import ppo_poi_emb as emb
from algos import ppo_poi_ensemble as ensemble
from common.checks import check_and_fill
from common.heldout import random_policy_transitions
from envs import OneHotFlatObs, resolve_env_id
from envs.views import NUM_CHANNELS
from tests.reference import by_reference, reference
from tests.test_smoke import DESIGN_METRICS, SMALL, only_run_dir, run
from common.tb import read_images, read_scalars


def skill_states(n, skill, num_skills=4, dim=64, seed=0):
    """Binary observations of `skill`: active units only in the skill's own block of the vector."""
    rng = np.random.default_rng(seed)
    block = dim // num_skills
    obs = np.zeros((n, dim), dtype=np.float32)
    obs[:, skill * block : (skill + 1) * block] = rng.random((n, block)) < 0.5
    return torch.tensor(obs)


@pytest.mark.parametrize("module", [diayn, emb])
def test_interest_fields_equal_those_of_the_poi_files(module):
    """One member: MC dropout as ppo_poi_disagreement.py's (same weights, same masks); several:
    member disagreement as ppo_poi_ensemble.py's (both tested there against plain loops)."""
    torch.manual_seed(0)
    obs, actions = (torch.rand(10, 32) < 0.5).float(), torch.randint(3, (10,))
    single = module.ExternalModel(32, 3, "forward", hidden_sizes=(12, 8, 12), dropout=0.3, num_members=1)
    plain = disagreement.ExternalModel(32, 3, "forward", hidden_sizes=(12, 8, 12), dropout=0.3)
    mine = [m for m in single.modules() if isinstance(m, module.EnsembleLinear)]
    theirs = [m for m in plain.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for a, b in zip(mine, theirs):
            a.weight.copy_(b.weight.T.unsqueeze(0))
            a.bias.copy_(b.bias.view(1, 1, -1))
    masks = disagreement.dropout_masks(plain, num_samples=7)
    torch.testing.assert_close(
        module.mc_dropout_poi(single, obs, actions, masks), disagreement.mc_dropout_poi(plain, obs, actions, masks)
    )
    torch.manual_seed(1)
    poi_single = module.poi_values(single, obs, actions, num_samples=30)
    torch.manual_seed(1)
    assert torch.allclose(poi_single, disagreement.poi_values(plain, obs, actions, num_samples=30), atol=1e-5)

    members = module.ExternalModel(32, 3, "key_distance", hidden_sizes=(12, 8), num_members=4)
    other = ensemble.ExternalModel(32, 3, "key_distance", hidden_sizes=(12, 8), num_members=4)
    other.load_state_dict(members.state_dict())
    assert torch.allclose(
        module.poi_values(members, obs, actions, num_samples=30), ensemble.poi_values(other, obs, actions)
    )


def test_discriminator_tells_apart_skills_that_visit_disjoint_states():
    torch.manual_seed(0)
    num_skills = 4
    obs = torch.cat([skill_states(256, k, seed=k) for k in range(num_skills)])
    skills = torch.arange(num_skills).repeat_interleave(256)
    disc = diayn.discriminator(64, num_skills, hidden=64)
    optimizer = torch.optim.Adam(disc.parameters(), lr=1e-3)
    first_loss, first_correct = diayn.train_discriminator(disc, optimizer, obs, skills, batch_size=64)
    first_accuracy = first_correct.float().mean().item()
    for _ in range(20):
        loss, _ = diayn.train_discriminator(disc, optimizer, obs, skills, batch_size=64)
    fresh = torch.cat([skill_states(100, k, seed=10 + k) for k in range(num_skills)])
    fresh_skills = torch.arange(num_skills).repeat_interleave(100)
    accuracy = (disc(fresh).argmax(-1) == fresh_skills).float().mean().item()
    assert first_accuracy < 0.5 and accuracy > 0.95 and loss < 0.2 * first_loss
    # the DIAYN reward is near its maximum log(num_skills) for the right skill, negative for a wrong one
    right = diayn.diayn_rewards(disc, fresh, fresh_skills, num_skills)
    wrong = diayn.diayn_rewards(disc, fresh, (fresh_skills + 1) % num_skills, num_skills)
    assert right.mean() > 0.9 * np.log(num_skills) and right.max() <= np.log(num_skills) + 1e-6
    assert wrong.mean() < -1.0


def test_the_cells_the_discriminator_and_the_maps_see():
    """cells_of: the cell a step led to is the final one where the episode ended; disc_inputs: x
    and y one-hot; visitation_image: each skill's visits scaled to its busiest cell, side by side."""
    infos = {
        "agent_x": np.array([1, 1]),
        "agent_y": np.array([2, 1]),
        "final_info": {"agent_x": np.array([0, 4]), "agent_y": np.array([0, 3])},
    }
    assert diayn.cells_of(infos).tolist() == [[1, 2], [1, 1]]
    assert diayn.cells_of(infos, np.array([False, True])).tolist() == [[1, 2], [4, 3]]
    seen = diayn.disc_inputs(None, torch.tensor([[1, 2], [4, 3]]), "xy", 5)
    assert seen.tolist() == [[0, 1, 0, 0, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0, 1, 0]]
    visits = torch.zeros(2, 2, 3)
    visits[0, 1, 2], visits[0, 0, 0], visits[1, 0, 1] = 4, 2, 3
    assert diayn.visitation_image(visits).tolist() == [[[0.5, 0, 0, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0, 0]]]


def test_skill_distribution_matches_a_hand_worked_case():
    num_skills, uniform_weight = 5, 0.3
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2, 3])  # skill 4: no state
    poi = torch.tensor([1.0, 3.0, 1.0, 1.0, 6.0, 4.0, 5.0, 0.5])
    probs, per_skill = diayn.skill_distribution(labels, poi, num_skills, uniform_weight, temperature=1.0)
    # by hand: mean POI per skill 2, 1, 5, 0.5, and the mean of all (21.5 / 8) for the unlabelled skill
    expected_poi = torch.tensor([2.0, 1.0, 5.0, 0.5, 21.5 / 8])
    assert torch.allclose(per_skill, expected_poi)
    expected = uniform_weight / num_skills + (1 - uniform_weight) * expected_poi / expected_poi.sum()
    assert torch.allclose(probs, expected)
    # uniform prior weight 1 is plain DIAYN: every skill alike; a low temperature sharpens towards skill 2
    uniform, _ = diayn.skill_distribution(labels, poi, num_skills, 1.0, temperature=1.0)
    assert torch.allclose(uniform, torch.full((num_skills,), 0.2))
    sharp, _ = diayn.skill_distribution(labels, poi, num_skills, 0.0, temperature=0.1)
    assert sharp[2] > 0.99


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_after_a_change_the_skill_distribution_moves_to_the_skill_whose_states_changed(seed):
    """Four skills visit disjoint states; the model has learned them all. The world then changes
    where skill 2 goes, and the model takes a few passes on it: the MC-dropout interest rises
    there most, and the POI-guided distribution moves to skill 2: from about a quarter to 0.46-0.48 at seeds 0-2
    (the most the uniform weight 0.5 allows is 0.625), each other skill's share falling below 0.19."""
    torch.manual_seed(seed)
    num_skills, dim = 4, 64
    obs = torch.cat([skill_states(256, k, seed=10 * seed + k) for k in range(num_skills)])
    skills, actions = torch.arange(num_skills).repeat_interleave(256), torch.zeros(len(obs), dtype=torch.long)
    targets = obs.sum(1, keepdim=True) / 4  # a count, as the key distance is
    model = diayn.ExternalModel(dim, 3, "key_distance", hidden_sizes=(64, 64), dropout=0.1, num_members=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(150):
        diayn.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=64)
    disc = diayn.discriminator(dim, num_skills, hidden=64)
    disc_optimizer = torch.optim.Adam(disc.parameters(), lr=1e-3)
    for _ in range(20):
        diayn.train_discriminator(disc, disc_optimizer, obs, skills, batch_size=64)
    fresh = torch.cat([skill_states(128, k, seed=100 + 10 * seed + k) for k in range(num_skills)])
    labels = disc(fresh).argmax(-1)

    def distribution():
        poi = diayn.poi_values(model, fresh, torch.zeros(len(fresh), dtype=torch.long), num_samples=30)
        return diayn.skill_distribution(labels, poi, num_skills, uniform_weight=0.5, temperature=1.0)

    before, poi_before = distribution()
    targets[skills == 2] += 3.0
    for _ in range(3):
        diayn.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=64)
    after, poi_after = distribution()
    assert (before - 0.25).abs().max() < 0.1  # nothing stood out before the change
    assert after.argmax() == 2 and after[2] > 0.44 and (poi_after / poi_before).argmax() == 2
    assert (after[[0, 1, 3]] < 0.19).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_error_interest_moves_the_distribution_to_the_changed_skill_and_back(seed):
    """Four skills visit disjoint states (each state with the skill that visited it, as from the
    rollouts); the model has learned them all. The world then changes where skill 2 goes: before
    the model trains on it, its error there is the largest by far, and the error-guided
    distribution puts on skill 2 nearly all the uniform weight 0.5 leaves (0.625 at most).
    Once the model has re-learned it, skill 2 is no longer singled out."""
    torch.manual_seed(seed)
    num_skills, dim = 4, 64
    obs = torch.cat([skill_states(256, k, seed=10 * seed + k) for k in range(num_skills)])
    skills, actions = torch.arange(num_skills).repeat_interleave(256), torch.zeros(len(obs), dtype=torch.long)
    targets = obs.sum(1, keepdim=True) / 4
    model = diayn.ExternalModel(dim, 3, "key_distance", hidden_sizes=(64, 64), dropout=0.1, num_members=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(150):
        diayn.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=64)

    def distribution():
        errors = diayn.prediction_errors(model, obs, actions, targets)
        assert not model.training  # dropout off: the same errors on every call
        torch.testing.assert_close(errors, diayn.prediction_errors(model, obs, actions, targets))
        return diayn.skill_distribution(skills, errors, num_skills, uniform_weight=0.5, temperature=1.0)

    before, _ = distribution()
    targets[skills == 2] += 3.0
    after, error_after = distribution()
    by_hand = ((model.predict(obs, actions) - targets) ** 2).squeeze(1)
    torch.testing.assert_close(error_after[2], by_hand[skills == 2].mean())
    for _ in range(300):
        diayn.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=64)
    relearned, error_relearned = distribution()
    # a learned model's small errors differ by chance between skills, so neither end is uniform, but no
    # skill comes near the cap
    assert before.max() < 0.55 and relearned.max() < 0.55
    assert after.argmax() == 2 and after[2] > 0.6 and error_after[2] > 100 * error_relearned[2]


def test_the_error_interest_of_a_gaussian_model_is_its_mean_s_squared_error():
    """The skill weights take the log of the interest: with --model-gaussian the loss (a beta-NLL)
    turns negative once the std is small, the mean's squared error does not."""
    torch.manual_seed(0)
    obs, actions, targets = (torch.rand(32, 16) < 0.5).float(), torch.zeros(32, dtype=torch.long), torch.rand(32, 1)
    model = diayn.ExternalModel(16, 3, "key_distance", hidden_sizes=(8,), gaussian=True, nll_beta=0.0, num_members=2)
    with torch.no_grad():
        model.log_std.bias.fill_(-4.0)
        model.log_std.weight.zero_()
        model.mean.bias.copy_(targets.mean().expand_as(model.mean.bias))
    model.eval()
    assert (model.per_sample_loss(obs, actions, targets) < 0).any()
    mean, _ = model(obs, actions)
    expected = ((mean - targets) ** 2).squeeze(-1).mean(0)
    torch.testing.assert_close(diayn.prediction_errors(model, obs, actions, targets), expected)
    assert (expected >= 0).all()


def test_state_sampler_vae_learns_minigrid_observations_and_samples_valid_views():
    torch.manual_seed(0)
    env = OneHotFlatObs(gym.make(resolve_env_id("ColorDoorKey-6x6")))
    obs = torch.tensor(random_policy_transitions(env, 1024, seed=0)["obs"])
    vae = diayn.StateVAE(obs.shape[1], latent=8, hidden=128)
    optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3)
    losses = [diayn.train_vae(vae, optimizer, obs, batch_size=128) for _ in range(15)]
    assert losses[-1] < 0.3 * losses[0]
    samples = vae.sample(64)
    cells = samples.reshape(64, -1, NUM_CHANNELS)
    assert samples.shape == (64, obs.shape[1]) and torch.all(cells.sum(-1) == 3)  # object, colour, state
    # samples look like the data: most cells agree with the nearest observation
    nearest = (samples @ obs.T).max(-1).values / 3
    assert nearest.mean() > 0.7 * cells.shape[1]


def test_interest_embedding_is_invariant_to_the_order_of_the_set():
    torch.manual_seed(0)
    net = emb.InterestEmbedding(obs_dim=32, emb_size=6, hidden=16)
    states, poi = torch.rand(3, 10, 32), torch.rand(3, 10)
    e = net(states, poi)
    perm = torch.randperm(10)
    assert torch.allclose(e, net(states[:, perm], poi[:, perm]), atol=1e-6)
    assert not torch.allclose(e, net(states, poi.flip(-1)), atol=1e-3)  # the POI values matter


@pytest.mark.parametrize("seed", [0, 1])
def test_interest_embedding_learns_to_predict_poi_from_the_set(seed):
    """POI is the share of active units in one block, the block changing from set to set: only e
    can tell the predictor which block, so the loss falls well below the best blind guess."""
    torch.manual_seed(seed)
    dim, blocks = 32, 4

    def landscape(block, n):
        states = (torch.rand(n, dim) < 0.5).float()
        return states, states[:, block * 8 : (block + 1) * 8].sum(-1) / 8

    net = emb.InterestEmbedding(dim, emb_size=4, hidden=64)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(1200):
        batch = [landscape(int(b), 64) for b in torch.randint(blocks, (16,))]
        states, poi = torch.stack([s for s, _ in batch]), torch.stack([p for _, p in batch])
        loss = ((net.predict_poi(net(states[:, :32], poi[:, :32]), states[:, 32:]) - poi[:, 32:]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # without e the best guess is the mean over the blocks: a quarter of the variance is explained
    blind = 0.75 * poi[:, 32:].var().item()
    assert np.mean(losses[-50:]) < 0.5 * blind


DIAYN_METRICS = {
    "diayn/disc_loss",
    "diayn/disc_accuracy",
    "diayn/reward_mean",
    "diayn/skill_share",
    "skills/frequency_0",
    "skills/prob_4",
    "poi/skill_4",
    "poi/mean",
    "poi/eval_mean",
    "losses/diayn_value_loss",
}
EMB_METRICS = {
    "emb/loss",
    "emb/raw_norm",
    "emb/projection_0",
    "emb/projection_2",
    "poi/mean",
    "poi/by_action/turn",
    "poi/by_action/forward",
    "poi/intrinsic_reward_mean",
    "poi/eval_mean",
    "losses/int_value_loss",
}
DIAYN = ["--num-skills", "5", "--skill-warmstart", "512"]


@pytest.mark.parametrize(
    "script, flags, metrics",
    [
        ("algos/ppo_poi_diayn.py", DIAYN, DIAYN_METRICS | {"diayn/vae_loss"}),
        (
            "algos/ppo_poi_diayn.py",
            [*DIAYN, "--state-sampler", "rollouts", "--interest-field", "ensemble", "--disc-input", "xy"],
            DIAYN_METRICS,
        ),
        (
            "algos/ppo_poi_diayn.py",
            [*DIAYN, "--state-sampler", "rollouts", "--skill-interest", "error", "--model-gaussian"],
            DIAYN_METRICS,
        ),
        ("algos/ppo_poi_emb.py", [], EMB_METRICS),
        ("algos/ppo_poi_emb.py", ["--interest-field", "ensemble", "--ensemble-size", "3"], EMB_METRICS),
    ],
)
def test_shaping_files_log_everything_ppo_logs_and_their_own(tmp_path, script, flags, metrics):
    run(
        tmp_path,
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--total-timesteps",
        "1280",
        "--model-target",
        "key_distance",
        "--save-model",
        *flags,
        script=script,
    )
    scalars = read_scalars(only_run_dir(tmp_path))
    assert (DESIGN_METRICS - {"charts/episodic_return", "charts/episodic_length"}) | metrics <= set(scalars)
    if "diayn" in script:
        probs = np.array([[v for _, v in scalars[f"skills/prob_{k}"]] for k in range(5)])
        assert np.allclose(probs.sum(0), 1.0) and np.allclose(probs[:, 0], 0.2)  # uniform during the warm start
        # a share of the rollout's steps with a skill (each episode's first 32 under --skill-then-task, the default)
        with_skill = {step: share * 2 * 128 for step, share in scalars["diayn/skill_share"]}
        correct = np.array([v * with_skill[step] for step, v in scalars["diayn/disc_accuracy"]])
        assert np.allclose(correct, np.round(correct), atol=1e-3) and min(with_skill.values()) < 256


SHAPING_BAD_FLAGS = [
    ("ppo_poi_diayn", ["--num-skills", "1"], "--num-skills must be a finite number in [2, inf), got 1"),
    ("ppo_poi_diayn", ["--uniform-prior-weight", "1.5"], "--uniform-prior-weight must be a finite number in [0, 1]"),
    ("ppo_poi_diayn", ["--disc-input", "xy"], "--disc-input xy needs a ColorDoorKey env (its info has the cells) and"),
    ("ppo_poi_diayn", ["--skill-interest", "error"], "--skill-interest error needs --state-sampler rollouts"),
    ("ppo_poi_diayn", ["--skill-envs", "17"], "--skill-envs must be at most --num-envs=16, got 17"),
    ("ppo_poi_diayn", ["--skill-steps", "0"], "--skill-steps 0 (one skill per episode) needs --no-skill-then-task: by"),
    ("ppo_poi_diayn", ["--no-task-reward"], "--no-task-reward needs --no-skill-then-task"),
    ("ppo_poi_emb", ["--emb-size", "0"], "--emb-size must be positive, got 0"),
    ("ppo_poi_emb", ["--interest-field", "ensemble", "--ensemble-size", "1"], "--ensemble-size must be at least 2"),
]


@pytest.mark.parametrize("name, flags, message", SHAPING_BAD_FLAGS)
def test_shaping_files_reject_bad_flags_naming_them(name, flags, message):
    import tyro

    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError) as error:
        check_and_fill(tyro.cli(module.Args, args=flags), module.RANGES, module.fill_in_defaults)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "name, flags, message", [f for f in SHAPING_BAD_FLAGS if f[1][0] in ("--num-skills", "--emb-size")]
)
def test_shaping_files_reject_bad_flags_on_the_command_line_with_one_line(tmp_path, name, flags, message):
    """Each file's command-line path, in a fresh interpreter: one line, exit 1, no run folder."""
    proc = run(tmp_path, *flags, script=f"algos/{name}.py", check=False, fresh=True)
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {message}"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("key", by_reference(["ppo_poi_diayn.py"]))
def test_diayn_on_colordoorkey_logs_where_the_skills_go_at_each_evaluation(shared_run, key):
    """The reference run (tests/reference.py: ColorDoorKey-6x6, 7 iterations of 128 steps, evaluated at each): a
    visitation map at each iteration's end."""
    script, flags = reference(key)
    images = read_images(shared_run(script, *flags), "skills/visitation")
    assert [step for step, _ in images] == [128 * i for i in range(1, 8)] and all(png for _, png in images)


def test_diayn_runs_on_a_minigrid_id_without_cells(tmp_path):
    """Only ColorDoorKey's info has the agent's cell: elsewhere no cells, no visitation map."""
    run(tmp_path, *SMALL, "--env", "MiniGrid-Empty-5x5-v0", "--total-timesteps", "256", script="algos/ppo_poi_diayn.py")
    assert "diayn/disc_accuracy" in read_scalars(only_run_dir(tmp_path))
    assert read_images(only_run_dir(tmp_path), "skills/visitation") == []


@pytest.mark.slow
def test_the_diayn_gate_holds_the_skills_back_until_the_task_is_done(tmp_path):
    """--diayn-after-return: the DIAYN advantage has weight 0 until the mean return of the last 100
    episodes reaches it, so until then the update is --diayn-coef 0's. On MiniGrid-Empty-5x5 a random
    policy is rewarded now and then, so a low bar opens the gate once 100 episodes have ended."""
    flags = (
        "--env",
        "MiniGrid-Empty-5x5-v0",
        "--num-envs",
        "8",
        "--num-steps",
        "64",
        "--num-minibatches",
        "2",
        "--total-timesteps",
        "8192",
        "--eval-steps",
        "64",
        *DIAYN,
    )

    def scalars(*extra):
        folder = tmp_path / "_".join(extra)
        folder.mkdir()
        run(folder, *flags, *extra, script="algos/ppo_poi_diayn.py")
        return read_scalars(only_run_dir(folder))

    def policy_losses(logged):
        return [v for _, v in logged["losses/policy_loss"]]

    gated, never = scalars("--diayn-after-return", "0.001"), scalars("--diayn-coef", "0")
    steps, weights = zip(*gated["diayn/weight"])
    opened = weights.index(diayn.Args.diayn_coef)
    assert 0 < opened and set(weights[:opened]) == {0.0} and set(weights[opened:]) == {diayn.Args.diayn_coef}
    ended = [step for step, _ in gated["charts/episodic_return"]]
    assert sum(s <= steps[opened - 1] for s in ended) < 100 <= sum(s <= steps[opened] for s in ended)
    assert policy_losses(gated)[:opened] == policy_losses(never)[:opened]
    assert policy_losses(gated)[opened:] != policy_losses(never)[opened:]
    assert {v for _, v in never["diayn/weight"]} == {0.0}
    # every env has skills here: the skill envs' return is the mean return of the episodes ended in that rollout
    bounds = [0, *steps]  # diayn/weight: one point per iteration, at its last global step
    logged = dict(gated["diayn/skill_env_return"])
    for low, high in zip(bounds, bounds[1:]):
        in_rollout = [v for s, v in gated["charts/episodic_return"] if low < s <= high]
        assert (high in logged) == bool(in_rollout)
        assert dict(gated["diayn/skill_env_episodes"])[high] == len(in_rollout)
        assert not in_rollout or np.isclose(logged[high], np.mean(in_rollout), rtol=1e-6)
    assert len(logged) > 10


def test_the_diayn_return_bootstraps_at_a_termination_only_with_its_flag(tmp_path):
    """--diayn-bootstrap-at-termination changes nothing until an episode terminates (here: reaches the goal of
    MiniGrid-Empty-5x5, the only episodes with a return above 0), and from the iteration where one first does the
    DIAYN return and so the update; with the DIAYN weight 0 the task's update stays the same throughout (the task
    return is not touched; the DIAYN value head trains apart): bitwise until the first truncation, within rounding
    after it."""
    flags = ("--num-envs", "8", "--num-steps", "8", "--num-minibatches", "2", "--eval-steps", "64")
    flags += ("--env", "MiniGrid-Empty-5x5-v0", "--total-timesteps", "1024", *DIAYN)
    # one skill per episode and no truncation before the first termination (100 steps): nothing else writes a final
    # DIAYN value before it, so a wrong bootstrap that reads an unwritten one (0) cannot pass for the right one
    flags += ("--skill-steps", "0", "--no-skill-then-task")

    def scalars(name, *extra):
        folder = tmp_path / name
        folder.mkdir()
        run(folder, *flags, *extra, script="algos/ppo_poi_diayn.py")
        return read_scalars(only_run_dir(folder))

    off, on = scalars("off"), scalars("on", "--diayn-bootstrap-at-termination")
    reached = [step for step, value in off["charts/episodic_return"] if value > 0]
    steps = [step for step, _ in off["losses/policy_loss"]]  # one point per iteration, at its last global step
    first = next(i for i, step in enumerate(steps) if step >= reached[0])  # the iteration of the first termination
    assert first > 0 and steps[first] <= 8 * 100  # some iterations without one, to compare; none truncated yet

    def until_then(logged):  # the episodes of the rollouts before the first update that can differ
        return [(step, value) for step, value in logged["charts/episodic_return"] if step <= steps[first]]

    assert until_then(off) == until_then(on)
    for tag in ("losses/policy_loss", "losses/diayn_value_loss"):
        assert off[tag][:first] == on[tag][:first]
        assert off[tag][first] != on[tag][first]
    # with the DIAYN weight 0 the task's update stays the same, bitwise until the first truncation (env step 100: the
    # flag then adds the terminated rows to the batch that computes the truncated rows' final values, which can move
    # their last bits)
    untruncated = sum(step < 8 * 100 for step in steps)
    assert first < untruncated
    weightless = [
        scalars(name, "--diayn-coef", "0", *extra)
        for name, extra in (("off0", ()), ("on0", ("--diayn-bootstrap-at-termination",)))
    ]
    for tag in ("losses/policy_loss", "losses/value_loss"):
        assert weightless[0][tag][:untruncated] == weightless[1][tag][:untruncated]
        # and within rounding after it: a flag that took truncated episodes' final values away moves them by far more
        np.testing.assert_allclose(*(np.array(run[tag])[:, 1] for run in weightless), rtol=1e-5)
    assert weightless[0]["losses/diayn_value_loss"][:first] == weightless[1]["losses/diayn_value_loss"][:first]
    assert weightless[0]["losses/diayn_value_loss"][first] != weightless[1]["losses/diayn_value_loss"][first]


@pytest.mark.parametrize("then_task", [False, True])
def test_with_skill_then_task_an_episode_carries_its_skill_for_its_first_steps_only(tmp_path, then_task):
    """--skill-then-task (the default): an episode's first --skill-steps steps carry a skill, the rest none. One env,
    so its episodes follow one another and the logged episode lengths place every step in its episode: a plain loop over
    them gives each rollout's share of steps with a skill, which the run logs as diayn/skill_share (with
    --no-skill-then-task: every step has a skill, a new one each --skill-steps steps)."""
    skill_steps, num_steps = 12, 32
    flags = ["--env", "MiniGrid-Empty-5x5-v0", "--num-envs", "1", "--num-steps", str(num_steps)]
    flags += ["--num-minibatches", "2", "--eval-steps", "64", "--total-timesteps", "1024", *DIAYN]
    flags += ["--skill-steps", str(skill_steps)] + ([] if then_task else ["--no-skill-then-task"])
    run(tmp_path, *flags, script="algos/ppo_poi_diayn.py")
    scalars = read_scalars(only_run_dir(tmp_path))
    lengths = [int(v) for _, v in scalars["charts/episodic_length"]]
    assert len(lengths) >= 3 and max(lengths) > skill_steps  # episodes that go on past their skill, and resets
    position, with_skill = 0, []  # each step's place in its episode (the last one runs on past the logged ones)
    episode_ends = np.cumsum(lengths)
    for step in range(1024):
        with_skill.append(position < skill_steps or not then_task)
        position = 0 if step + 1 in episode_ends else position + 1
    expected = np.mean(np.reshape(with_skill, (-1, num_steps)), axis=1)
    logged = [v for _, v in scalars["diayn/skill_share"]]
    assert np.allclose(logged, expected, atol=1e-6)
    assert (min(logged) < 1.0) == then_task and (min(logged) == 0.0) == then_task  # rollouts without a skill too
    # what the steps with a skill teach is logged for exactly the rollouts that have some, and is finite
    with_skills = [step for step, share in scalars["diayn/skill_share"] if share > 0]
    for tag in ("diayn/disc_loss", "diayn/disc_accuracy", "diayn/reward_mean", "diayn/vae_loss", "poi/mean"):
        assert [step for step, _ in scalars[tag]] == with_skills and np.isfinite([v for _, v in scalars[tag]]).all()


def test_envs_without_skills_see_no_skill_and_follow_the_task_advantage_alone():
    """--skill-envs: skill `num_skills` is a zero skill input; the mixed advantage against a hand-worked case."""
    agent_input, mix_advantages = diayn.agent_input, diayn.mix_advantages
    x = agent_input(torch.ones(3, 2), torch.tensor([0, 2, 3]), 3, 5.0)
    assert x.tolist() == [[1, 1, 5, 0, 0], [1, 1, 0, 0, 5], [1, 1, 0, 0, 0]]
    task, skill = torch.tensor([1.0, 2.0, 3.0, 6.0]), torch.tensor([0.0, 4.0, 8.0, 100.0])
    rows = torch.tensor([False, True, True, False])
    mixed = mix_advantages(task, skill, rows, 0.75, 0.25, norm=False)
    assert mixed.tolist() == [1.0, 0.75 * 2 + 0.25 * 4, 0.75 * 3 + 0.25 * 8, 6.0]
    # normalised: the task's over all four steps (mean 3, std sqrt(14/3)), DIAYN's over the two with skills (6 +- 2.83)
    normed = mix_advantages(task, skill, rows, 0.75, 0.25, norm=True)
    task_n = (task - 3.0) / (14.0 / 3.0) ** 0.5
    expected = [task_n[0], 0.75 * task_n[1] - 0.25 / 2**0.5, 0.75 * task_n[2] + 0.25 / 2**0.5, task_n[3]]
    assert torch.allclose(normed, torch.stack(expected), atol=1e-6)
    # every step with skills: the files' mix of the two normalised advantages, whatever the spread
    everywhere = torch.ones(4, dtype=torch.bool)
    skill_n = (skill - skill.mean()) / (skill.std() + 1e-8)
    assert torch.equal(
        mix_advantages(task, skill, everywhere, 0.75, 0.25, True), 0.75 * task_n.float() + 0.25 * skill_n
    )
    # no task weight (no task reward reaches the agent): the envs without skills follow nothing
    assert mix_advantages(task, skill, rows, 0.0, 1.0, norm=False).tolist() == [0.0, 4.0, 8.0, 0.0]
    # one step with skills: no DIAYN weight (no spread to normalise by)
    one = torch.tensor([False, True, False, False])
    assert torch.allclose(mix_advantages(task, skill, one, 0.75, 0.25, True), torch.where(one, 0.75 * task_n, task_n))


def test_diayn_with_skills_in_a_share_of_the_envs_runs_and_trains_the_discriminator_on_those(tmp_path):
    run(
        tmp_path,
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--total-timesteps",
        "2560",
        "--skill-envs",
        "1",
        *DIAYN,
        "--state-sampler",
        "rollouts",
        "--disc-input",
        "xy",
        "--no-skill-then-task",  # every step of env 0 has a skill
        script="algos/ppo_poi_diayn.py",
    )
    scalars = read_scalars(only_run_dir(tmp_path))
    # a share of env 0's 128 steps (of the rollout's 256, ten iterations would give a half at least once, p = 1 - 2^-10)
    correct = np.array([v for _, v in scalars["diayn/disc_accuracy"]]) * 128
    assert len(correct) == 10 and np.allclose(correct, np.round(correct), atol=1e-3)
    # the skill envs' episodes are env 0's: some of the two envs' episodes, not all (every env: the gate test)
    assert 0 < sum(v for _, v in scalars["diayn/skill_env_episodes"]) < len(scalars["charts/episodic_return"])
