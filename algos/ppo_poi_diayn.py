# docs: docs/algorithms/ppo_poi_diayn.md
import os
from collections import deque
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python algos/ppo.py` finds envs/ and common/

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical

from common.checkpoint import env_state, restore_checkpoint, set_env_state
from common.columns import keep_columns, select_columns
from common.console import say
from common.heldout import HeldoutEval
from common.precision import resolve_bf16
from common.runs import Run, RunArgs, check_finite, parse_args, progress_line
from envs import fill_in_env_defaults, is_color_door_key, make_vector_env, resolve_env_id, true_next_obs, view_columns
from envs.views import CHANNEL_OFFSETS, NUM_CHANNELS


@dataclass
class Args(RunArgs):  # and the run's own flags: RunArgs in common/runs.py
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be enabled when available"""
    bf16: Literal["auto", "on", "off"] = "off"
    """the PPO update's matrix products in bfloat16 (autocast; weights, optimiser, losses and the external model stay
    float32); `auto`: on where the device computes bfloat16 fast (AMX, CUDA: common/precision.py)"""

    # environment arguments
    env: str = "ColorDoorKey"
    """ColorDoorKey, ColorDoorKey-6x6/-8x8/-16x16, or a registered MiniGrid id"""
    change_steps: tuple[int, ...] | None = None
    """global steps at which the correct key colour changes (default for ColorDoorKey: one change at the midpoint)"""
    correct_key_colors: tuple[str, ...] = ("red", "blue")
    """the correct key colour of each phase (ColorDoorKey only)"""
    vector_env: Literal["auto", "minigrid", "batched"] = "auto"
    """`batched`: ColorDoorKey worlds as numpy arrays (envs/batched.py, step-equal to minigrid); `auto`: batched where it can"""

    # PPO arguments
    total_timesteps: int = 4_000_000
    """total timesteps of the experiments"""
    learning_rate: float = 5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 16
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = False
    """Toggle learning rate annealing (linear to 0 over the run) for policy and value networks; off: a change of the world mid-run must not meet a vanishing rate"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # external model arguments
    model_target: Literal["auto", "forward", "key_distance", "agent_dir"] = "auto"
    """what the external model predicts: `forward` (next_obs - obs from obs and action) or an info value; `auto`:
    `key_distance` on ColorDoorKey (EMMA's predictor there, the studies' target), `forward` elsewhere"""
    model_gaussian: bool = False
    """if toggled, the model predicts a mean and a log-std and is trained by Gaussian NLL (else MSE)"""
    model_nll_beta: float = 0.5
    """beta-NLL (Seitzer et al. 2022): each dimension's NLL weighted by a detached std^(2*beta); 0 = plain NLL"""
    model_faithful: bool = False
    """with --model-gaussian: the mean learns by MSE alone, the log-std head by the plain NLL of the detached mean from
    detached features (Stirn et al. 2023): the mean is an MSE model's; --model-nll-beta unused"""
    model_hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer sizes of the external model (EMMA's: 300 100 300 for `forward`, 100 10 for info targets)"""
    model_dropout: float = 0.1
    """dropout probability after each hidden layer of the external model (EMMA's: 0.5)"""
    model_learning_rate: float = 1e-3
    """the learning rate of the external model's Adam optimizer"""
    model_epochs: int = 1
    """passes over each rollout's transitions to train the external model"""
    model_batch_size: int = 256
    """the mini-batch size of the external model's training"""
    eval_every: int = 2
    """evaluate the external model on the held-out sets every this many iterations"""
    eval_steps: int = 10240
    """random-policy steps in the held-out set of each phase (the same for every seed)"""
    eval_episode_steps: int = 80
    """steps of each held-out layout's random episode: eval-steps / eval-episode-steps layouts"""
    eval_changed_min: int = 256
    """at least this many transitions whose target a colour change alters, in each phase's changed set"""

    # POI and skill arguments
    interest_field: Literal["mc_dropout", "ensemble"] = "mc_dropout"
    """the POI: spread of MC-dropout predictions of one model, or disagreement of an ensemble's members"""
    mc_samples: int = 30
    """stochastic forward passes (dropout on) whose spread is the point-of-interest value (mc_dropout)"""
    ensemble_size: int = 5
    """members of the external model's ensemble (interest field `ensemble`)"""
    num_skills: int = 8
    """number of skills z; the policy and the values see the observation and a one-hot z"""
    diayn_coef: float = 2.0
    """weight of the DIAYN advantages (reward log q(z|s') - log p(z), p uniform; normalised per minibatch; the weights mix as shares of their sum)"""
    diayn_after_return: float = 0.0
    """the DIAYN advantages count only while the mean return of the last 100 episodes is at least this (live, after SMERL: diversity only while the task is done; 0, or --no-task-reward: always)"""
    diayn_bootstrap_at_termination: bool = False
    """the DIAYN return bootstraps from the skill's value where an episode terminates (the task done), as where one is
    truncated or a skill ends, so doing the task forfeits no skill reward (as far as that value estimates it; the goal
    states are rarely seen); off: it stops there, and a skill reward above 0 (q(z|s') > p(z)) pays for every step the
    task is not done"""
    ext_coef: float = 2.0
    """weight of the task advantages (each kind normalised per minibatch; the weights mix as shares of their sum)"""
    uniform_prior_weight: float = 0.5
    """weight of the uniform distribution in the skill distribution; 1 = plain online DIAYN (POI unused)"""
    skill_temperature: float = 1.0
    """skill distribution: softmax(log(POI of the skill's states) / temperature), mixed with the uniform"""
    skill_envs: int | None = None
    """how many of the envs (the first ones) carry skills and the DIAYN reward; the others see no skill (a zero skill
    input) and learn the task alone (default: all of them)"""
    skill_steps: int = 32
    """the steps of an episode's skill (then the task alone); with --no-skill-then-task, a new skill after this many
    steps of one skill within an episode (0: one skill per episode)"""
    skill_then_task: bool = True
    """an episode carries one skill for its first --skill-steps steps, then none (a zero skill input, no DIAYN reward:
    the task alone) until it ends; --no-skill-then-task: a new skill after every --skill-steps steps until it ends"""
    skill_warmstart: int = 100_000
    """skills are drawn uniformly before this global step"""
    skill_states: int = 512
    """states sampled and scored by their interest to weigh the skills (once per rollout)"""
    skill_interest: Literal["poi", "error"] = "poi"
    """the interest of a skill's states: the interest field's POI, or the external model's squared error on the rollout's
    transitions before it trains on them (sees what a change alters; needs --state-sampler rollouts)"""
    disc_input: Literal["view", "xy"] = "view"
    """what the discriminator q(z|s) sees of a state: the one-hot view (EMMA), or the agent's cell, x and y one-hot (DIAYN's x-y prior; ColorDoorKey, --state-sampler rollouts)"""
    state_sampler: Literal["vae", "rollouts"] = "vae"
    """where those states come from: a VAE trained online on visited observations, each labelled with its
    likeliest skill by the discriminator, or the last rollout, each with the skill that visited it"""
    vae_latent: int = 16
    """latent size of the state sampler's VAE"""
    disc_learning_rate: float = 1e-3
    """learning rate of the discriminator q(z|s) and the VAE"""
    reward_warmstart: int = 0
    """no extrinsic reward reaches the agent before this global step"""
    no_task_reward: bool = False
    """if toggled, the agent learns from the DIAYN reward alone"""

    # filled in at runtime (not flags: a value given would be overwritten)
    batch_size: tyro.conf.Suppress[int] = 0
    """the batch size (computed in runtime)"""
    minibatch_size: tyro.conf.Suppress[int] = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: tyro.conf.Suppress[int] = 0
    """the number of iterations (computed in runtime)"""


# what each flag may take, checked before the run starts (common/checks.py): "positive" (an integer, or each of a
# tuple's), or an interval with open "(" or closed "[" ends; an optional flag left at None passes
RANGES = {
    "positive": (
        "total_timesteps num_envs num_steps num_minibatches update_epochs model_hidden_sizes model_epochs "
        "model_batch_size eval_every eval_steps eval_episode_steps skill_states vae_latent torch_threads skill_envs"
    ),
    "(0, inf)": (
        "learning_rate clip_coef max_grad_norm target_kl model_learning_rate disc_learning_rate skill_temperature"
    ),
    "[0, 4294967295]": "seed",  # numpy seeds its generator with 32 bits
    "[0, inf)": (
        "checkpoint_every ent_coef vf_coef model_nll_beta eval_changed_min diayn_coef ext_coef "
        "diayn_after_return skill_steps reward_warmstart skill_warmstart"
    ),
    "(0, 1]": "gamma",
    "[0, 1]": "gae_lambda uniform_prior_weight",
    "[0, 1)": "model_dropout",
    "[2, inf)": "num_skills",
}


def fill_in_defaults(args: Args) -> None:
    """Fill in the flags whose defaults depend on others (the model's target; the env's phase schedule and
    vector env: envs.fill_in_env_defaults; what --bf16 auto is here: common/precision.py) and the runtime
    sizes; ValueError (one line) for what cannot run."""
    args.batch_size = args.num_envs * args.num_steps
    if args.batch_size % args.num_minibatches:
        raise ValueError(
            f"batch size num-envs*num-steps={args.batch_size} is not divisible by --num-minibatches={args.num_minibatches}"
        )
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations == 0:
        raise ValueError(f"--total-timesteps={args.total_timesteps} is smaller than one batch ({args.batch_size})")
    color_door_key = is_color_door_key(resolve_env_id(args.env))
    if args.model_target == "auto":
        args.model_target = "key_distance" if color_door_key else "forward"
    if args.model_target != "forward" and not color_door_key:
        raise ValueError(f"--model-target {args.model_target} needs a ColorDoorKey env (its info), got {args.env}")
    if args.disc_input == "xy" and not (color_door_key and args.state_sampler == "rollouts"):
        raise ValueError(
            "--disc-input xy needs a ColorDoorKey env (its info has the cells) and --state-sampler rollouts"
        )
    if args.skill_envs is None:
        args.skill_envs = args.num_envs
    if args.skill_envs > args.num_envs:
        raise ValueError(f"--skill-envs must be at most --num-envs={args.num_envs}, got {args.skill_envs}")
    if args.skill_then_task and args.skill_steps == 0:
        raise ValueError(
            "--skill-steps 0 (one skill per episode) needs --no-skill-then-task: by default it is a skill's length"
        )
    if args.skill_then_task and args.no_task_reward:
        raise ValueError("--no-task-reward needs --no-skill-then-task (the steps after a skill are the task's)")
    if args.skill_interest == "error" and args.state_sampler != "rollouts":
        raise ValueError("--skill-interest error needs --state-sampler rollouts (the rollout's targets)")
    if args.interest_field == "mc_dropout" and args.mc_samples < 2:
        raise ValueError(f"--mc-samples must be at least 2, got {args.mc_samples}")
    if args.interest_field == "mc_dropout" and args.model_dropout == 0.0:
        raise ValueError("MC-dropout disagreement needs --model-dropout > 0")
    if args.interest_field == "ensemble" and args.ensemble_size < 2:
        raise ValueError(f"--ensemble-size must be at least 2, got {args.ensemble_size}")
    fill_in_env_defaults(args)
    if args.model_faithful and not args.model_gaussian:
        raise ValueError("--model-faithful needs --model-gaussian (it says how a Gaussian model learns)")
    args.bf16 = resolve_bf16(args.bf16, args.cuda)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, num_actions, bf16=False, columns=None):
        super().__init__()
        self.bf16 = bf16
        self.register_buffer("columns", None if columns is None else torch.as_tensor(columns))  # see keep_columns
        self.critic = nn.Sequential(
            keep_columns(layer_init(nn.Linear(obs_dim, 256)), columns),
            nn.Tanh(),
            layer_init(nn.Linear(256, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        # intrinsic value head: reads the critic's body, never trains it
        self.critic_int = layer_init(nn.Linear(64, 1), std=1.0)
        self.actor = nn.Sequential(
            keep_columns(layer_init(nn.Linear(obs_dim, 256)), columns),
            nn.Tanh(),
            layer_init(nn.Linear(256, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )

    def amp(self):
        """--bf16: the matrix products of gradient passes (the PPO update's minibatches) in bfloat16,
        outputs cast back to float32; rollout steps (16 rows, no gradient) run faster in float32."""
        return self.bf16 and torch.is_grad_enabled()

    def act(self, x, noise):
        """The action for `x` under Gumbel `noise`, a sample of the policy (zeros: the likeliest); --save-model exports it."""
        return (self.actor(select_columns(x, self.columns)) + noise).argmax(-1)

    def task_parameters(self):
        """Every parameter but the intrinsic value head's: the actor and the task critic, ppo.py's agent."""
        return [p for name, p in self.named_parameters() if not name.startswith("critic_int.")]

    def get_value(self, x):
        """Task and intrinsic values, the critic's body run once; only the task value trains it (the intrinsic
        reward changes with the external model and would otherwise move the task critic's features)."""
        with torch.autocast(x.device.type, torch.bfloat16, enabled=self.amp()):
            hidden = self.critic[:-1](select_columns(x, self.columns))
            return self.critic[-1](hidden).float(), self.critic_int(hidden.detach()).float()

    def get_action_and_value(self, x, action=None):
        with torch.autocast(x.device.type, torch.bfloat16, enabled=self.amp()):
            logits = self.actor(select_columns(x, self.columns)).float()
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), *self.get_value(x)


class EnsembleLinear(nn.Module):
    """`num_members` independent linear layers as one batched matmul: (K, B, in) -> (K, B, out)."""

    def __init__(self, num_members, in_features, out_features):
        super().__init__()
        self.in_features = in_features
        bound = 1.0 / np.sqrt(in_features)  # nn.Linear's default initialisation, member by member
        self.weight = nn.Parameter(torch.empty(num_members, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num_members, 1, out_features).uniform_(-bound, bound))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)


class ExternalModel(nn.Module):
    """The model the agent feeds with data: an ensemble of `num_members` MLPs on the
    observation (and the one-hot action), all members in one batched computation.

    `target="forward"`: learns `next_obs - obs`; `predict` returns `obs + delta`.
    Otherwise it regresses one info value of the observation (`key_distance`, `agent_dir`).
    Deterministic (MSE) or Gaussian (mean and clamped log-std heads, beta-NLL: plain NLL
    shrinks the std of easy dimensions and then barely moves the mean of the hard ones;
    `faithful`: the mean learns as an MSE model's, the log-std head beside it without moving it).
    `predict` is the members' mean; losses are per member, so a loss averaged over the
    members is the loss of a typical single model.
    """

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

    def __init__(
        self,
        obs_dim,
        num_actions,
        target="forward",
        hidden_sizes=(256, 256),
        dropout=0.1,
        gaussian=False,
        nll_beta=0.5,
        faithful=False,
        num_members=5,
        columns=None,
    ):
        super().__init__()
        columns = None if columns is None else [int(c) for c in columns]
        self.config = dict(
            obs_dim=obs_dim,
            num_actions=num_actions,
            target=target,
            hidden_sizes=tuple(hidden_sizes),
            dropout=dropout,
            gaussian=gaussian,
            nll_beta=nll_beta,
            faithful=faithful,
            num_members=num_members,
            columns=columns,
        )
        self.num_actions, self.target, self.nll_beta = num_actions, target, nll_beta
        self.faithful = faithful  # the log-std learns from detached features: see loss
        self.register_buffer("columns", None if columns is None else torch.tensor(columns))  # see keep_columns
        self.num_members = num_members
        in_dim = obs_dim + (num_actions if target == "forward" else 0)
        out_dim = obs_dim if target == "forward" else 1
        kept = None if columns is None else columns + list(range(obs_dim, in_dim))  # the action's columns all count
        layers = []
        for size in hidden_sizes:
            layers += [EnsembleLinear(num_members, in_dim, size), nn.ReLU(), nn.Dropout(dropout)]
            in_dim = size
        keep_columns(layers[0], kept)
        self.body = nn.Sequential(*layers)
        self.mean = EnsembleLinear(num_members, in_dim, out_dim)
        self.log_std = EnsembleLinear(num_members, in_dim, out_dim) if gaussian else None

    def inputs(self, obs, actions):
        """What the first layer reads: the observation's `columns` (and the one-hot action of a forward model)."""
        obs = select_columns(obs, self.columns)
        if self.target != "forward":
            return obs
        return torch.cat([obs, torch.eye(self.num_actions, device=obs.device)[actions.long()]], dim=-1)

    def forward(self, obs, actions):
        """Each member's mean and log-std (None when deterministic), shaped (members, batch, out).
        A (batch, ...) input goes to every member; a (members, batch, ...) input gives each
        member its own batch."""
        x = self.inputs(obs, actions)
        h = self.body(x.expand(self.num_members, *x.shape) if x.dim() == 2 else x)
        if self.log_std is None:
            return self.mean(h), None
        return self.mean(h), self.log_std(h.detach() if self.faithful else h).clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)

    def per_sample_loss(self, obs, actions, targets):
        """MSE, or Gaussian beta-NLL without its constant, averaged over output dimensions;
        shaped (members, batch)."""
        return self.loss(*self(obs, actions), targets)

    def loss(self, mean, log_std, targets):
        """`per_sample_loss` of given predictions."""
        if log_std is None:
            return ((mean - targets) ** 2).mean(-1)
        if self.faithful:  # the value: the plain NLL; the gradients: MSE's for the mean, the NLL's for the log-std
            squared_error = (mean - targets) ** 2
            nll = 0.5 * ((targets - mean.detach()) / log_std.exp()) ** 2 + log_std
            return (nll + (squared_error - squared_error.detach())).mean(-1)
        nll = 0.5 * ((targets - mean) / log_std.exp()) ** 2 + log_std
        return ((2 * self.nll_beta * log_std).exp().detach() * nll).mean(-1)

    @torch.no_grad()
    def predict(self, obs, actions):
        """The members' mean prediction of the next observation (forward model) or info value, dropout off."""
        was_training = self.training
        self.eval()
        mean, _ = self(obs, actions)
        self.train(was_training)
        return obs + mean.mean(0) if self.target == "forward" else mean.mean(0)

    def save(self, path):
        torch.save({"config": self.config, "state_dict": self.state_dict()}, path)

    @classmethod
    def load(cls, path, map_location="cpu"):
        checkpoint = torch.load(path, map_location=map_location)
        model = cls(**checkpoint["config"])
        model.load_state_dict(checkpoint["state_dict"])
        return model.eval()


def model_targets(target, obs, next_obs, info_values):
    """What the external model learns for each transition: `next_obs - obs` or the info value of `obs`."""
    if target == "forward":
        return next_obs - obs
    return info_values.reshape(*info_values.shape, 1).float()


def train_external_model(model, optimizer, obs, actions, targets, epochs, batch_size):
    """Mini-batch passes over one rollout's transitions, each member in its own shuffled
    order (one batched step trains all); returns the members' mean training loss."""
    model.train()
    losses = []
    for _ in range(epochs):
        orders = torch.stack([torch.randperm(len(obs)) for _ in range(model.num_members)])
        for idx in orders.split(batch_size, dim=1):
            loss = model.per_sample_loss(obs[idx], actions[idx], targets[idx]).mean()
            optimizer.zero_grad()
            check_finite("external model's loss", loss)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return float(np.mean(losses))


def distinct_rows(x):
    """One index per distinct row of `x` (any of its occurrences), and each row's place among them:
    x[rows][inverse] == x."""
    _, inverse = torch.unique(x, dim=0, return_inverse=True)
    rows = torch.empty(int(inverse.max()) + 1, dtype=torch.long, device=x.device)
    return rows.scatter_(0, inverse, torch.arange(len(x), device=x.device)), inverse


def dropout_masks(model, num_samples, generator=None):
    """A Bernoulli keep-mask per dropout layer, shaped (num_samples, width): pass s of MC
    dropout is one thinned network applied to every observation. Each observation's
    predictions are distributed as under per-element masks, and each pass can leave its
    dropped units out of the matrices."""
    keep, device = 1.0 - model.config["dropout"], model.mean.weight.device
    return [
        torch.rand((num_samples, width), device=device, generator=generator) < keep
        for width in model.config["hidden_sizes"]
    ]


def kept_units(mask, keep):
    """Each pass's kept units, in order, padded to the largest count: indices (passes, P)
    and the dropout scale (passes, P), 1/keep on kept units and 0 on the padding."""
    counts = mask.sum(1)
    width = max(int(counts.max()), 1)
    indices = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :width]
    scale = (torch.arange(width, device=mask.device) < counts[:, None]) / keep
    return indices, scale


@torch.no_grad()
def mc_dropout_poi(model, obs, actions, masks):
    """A one-member model's MC-dropout disagreement under `masks` (from `dropout_masks`),
    as ppo_poi_disagreement.py's (same masks, same result): the variance over the
    passes of the mean head's prediction, averaged over output dimensions; one value per
    (observation, action), all passes in one batched computation.

    Each pass runs its thinned network (kept units only). The predictions y_s = W h_s + b
    are never formed: their variance summed over the D outputs is
    mean_s |W h_s|^2 - |W mean_s h_s|^2, and |W h|^2 = h^T (W^T W) h costs width^2
    instead of D * width (forward model: 300^2 against 980 * 300).
    """
    layers = [(layer.weight[0].T, layer.bias[0, 0]) for layer in model.body if isinstance(layer, EnsembleLinear)]
    out_weight = model.mean.weight[0].T  # (out, in), as nn.Linear's
    kept = [kept_units(mask, 1.0 - model.config["dropout"]) for mask in masks]
    # activations as (passes, units, batch). The first layer comes before any dropout: it
    # runs once; each pass then takes its kept units, and each next layer its kept rows and columns.
    h = torch.relu(nn.functional.linear(model.inputs(obs, actions), *layers[0])).T.contiguous()[kept[0][0]]
    for (weight, bias), (out_indices, _), (in_indices, in_scale) in zip(layers[1:], kept[1:], kept[:-1]):
        weight = weight[out_indices[:, :, None], in_indices[:, None, :]] * in_scale[:, None, :]
        h = torch.baddbmm(bias[out_indices][:, :, None], weight, h).relu_()
    indices, scale = kept[-1]
    h = h * scale[:, :, None]
    gram = out_weight.T @ out_weight
    sq_norms = torch.bmm(gram[indices[:, :, None], indices[:, None, :]], h).mul_(h).sum(1)  # |W h_s|^2
    h_mean = torch.zeros(len(gram), len(obs), device=h.device)
    h_mean.index_add_(0, indices.reshape(-1), h.reshape(-1, len(obs))).div_(len(h))
    variance_sum = sq_norms.mean(0) - (gram @ h_mean).mul_(h_mean).sum(0)
    return variance_sum.clamp_min(0.0) / len(out_weight)  # clamp: rounding can leave -1e-9 for no spread


@torch.no_grad()
def poi_values(model, obs, actions, num_samples, generator=None):
    """Disagreement of the external model, averaged over output dimensions, one value per
    (observation, action): the variance of the members' predictions (dropout off) for an
    ensemble, of `num_samples` MC-dropout passes (masks shared by the batch) for a one-member
    model. Equal inputs get equal values: each distinct (observation, action) is computed once."""
    rows, inverse = distinct_rows(model.inputs(obs, actions))
    obs, actions = obs[rows], actions[rows]
    if model.num_members == 1:
        return mc_dropout_poi(model, obs, actions, dropout_masks(model, num_samples, generator))[inverse]
    model.eval()
    predictions, _ = model(obs, actions)
    return (predictions - predictions.mean(0)).pow_(2).mean((0, 2))[inverse]  # torch's var(0) is ~8x slower on the CPU


def agent_input(obs, skills, num_skills, scale):
    """What the policy and the values see: the observation and the one-hot skill times `scale`, an
    observation's norm; skill `num_skills` is none (a zero skill input: an env without skills, --skill-envs). A
    one-hot view has 147 active inputs (49 cells x 3 attributes): beside them an unscaled skill is one input
    among 148 and the policy learns to ignore it."""
    return torch.cat([obs, scale * F.one_hot(skills, num_skills + 1)[..., :num_skills].float()], dim=-1)


def disc_inputs(views, cells, disc_input, grid_size):
    """What the discriminator sees of states: their one-hot views, or their cells (x, y) as one-hot x and y."""
    if disc_input == "view":
        return views
    return torch.cat([F.one_hot(cells[..., 0], grid_size), F.one_hot(cells[..., 1], grid_size)], dim=-1).float()


def cells_of(infos, done=None):
    """The agent's cell (x, y) in each env from a step's infos; with `done`, of the state the step
    led to (the final info where the episode ended, not the reset one)."""
    cells = np.stack([infos["agent_x"], infos["agent_y"]], axis=-1).astype(np.int64)
    if done is not None and done.any():
        ended = np.flatnonzero(done)
        cells[ended] = np.stack([infos["final_info"]["agent_x"][ended], infos["final_info"]["agent_y"][ended]], axis=-1)
    return cells


def visitation_image(visits):
    """Visits (skills, height, width) as one grey image (1, height, skills x (width + 1) - 1): each
    skill's share of its visits per cell, scaled to its busiest cell, the skills side by side."""
    num_skills, height, width = visits.shape
    share = visits / visits.amax(dim=(1, 2), keepdim=True).clamp(min=1e-12)
    image = torch.zeros(height, num_skills * (width + 1) - 1)
    for k in range(num_skills):
        image[:, k * (width + 1) : k * (width + 1) + width] = share[k]
    return image.unsqueeze(0)


def discriminator(in_dim, num_skills, hidden=256):
    """q(z | s): logits of the skill that led to state s (as `disc_inputs` shows it)."""
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, num_skills))


def minibatch_pass(loss_of, optimizer, num_samples, batch_size, name):
    """One pass over `num_samples` samples in random minibatches, an optimiser step on each
    `loss_of(indices)`; returns the mean loss."""
    losses = []
    for idx in torch.randperm(num_samples).split(batch_size):
        loss = loss_of(idx)
        optimizer.zero_grad()
        check_finite(name, loss)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return float(np.mean(losses))


def train_discriminator(disc, optimizer, obs, skills, batch_size):
    """One pass of cross-entropy over the rollout; returns (mean loss, which samples it labelled right before the pass)."""
    with torch.no_grad():
        correct = disc(obs).argmax(-1) == skills
    loss = minibatch_pass(
        lambda idx: F.cross_entropy(disc(obs[idx]), skills[idx]),
        optimizer,
        len(obs),
        batch_size,
        "discriminator's loss",
    )
    return loss, correct


@torch.no_grad()
def diayn_rewards(disc, obs, skills, num_skills):
    """log q(z | s) - log p(z) with the uniform prior p(z) = 1 / num_skills (DIAYN's fixed prior)."""
    log_q = torch.log_softmax(disc(obs), dim=-1).gather(-1, skills.unsqueeze(-1)).squeeze(-1)
    return log_q + np.log(num_skills)


class StateVAE(nn.Module):
    """A VAE of visited observations (Bernoulli decoder on the one-hot view); its samples,
    decoded to valid one-hot views, are the states that weigh the skills."""

    def __init__(self, obs_dim, latent=16, hidden=128):
        super().__init__()
        self.latent = latent
        self.encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, obs_dim))

    def loss(self, obs):
        """Negative ELBO per observation: Bernoulli reconstruction plus the KL to N(0, I)."""
        mean, log_var = self.encoder(obs).chunk(2, dim=-1)
        log_var = log_var.clamp(-10.0, 10.0)
        z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()
        recon = F.binary_cross_entropy_with_logits(self.decoder(z), obs, reduction="none").sum(-1)
        kl = 0.5 * (mean.pow(2) + log_var.exp() - 1.0 - log_var).sum(-1)
        return (recon + kl).mean()

    @torch.no_grad()
    def sample(self, n):
        return one_hot_cells(self.decoder(torch.randn(n, self.latent, device=self.decoder[0].weight.device)))


def one_hot_cells(logits):
    """Decoder logits -> valid one-hot views: in every cell, the most likely object, colour and state."""
    cells = logits.reshape(len(logits), -1, NUM_CHANNELS)
    out = torch.zeros_like(cells)
    for start, end in zip(CHANNEL_OFFSETS, (*CHANNEL_OFFSETS[1:], NUM_CHANNELS)):
        out[..., start:end] = F.one_hot(cells[..., start:end].argmax(-1), end - start).float()
    return out.reshape(len(logits), -1)


def train_vae(vae, optimizer, obs, batch_size):
    return minibatch_pass(lambda idx: vae.loss(obs[idx]), optimizer, len(obs), batch_size, "state VAE's loss")


@torch.no_grad()
def prediction_errors(model, obs, actions, targets):
    """The external model's squared error on each transition (its loss, or with --model-gaussian its mean's:
    the NLL can be negative, and the skill weights take its log), dropout off, the members' mean
    (--skill-interest error)."""
    model.eval()
    mean, _ = model(obs, actions)
    return ((mean - targets) ** 2).mean(-1).mean(0)


def skill_distribution(labels, poi, num_skills, uniform_weight, temperature):
    """Weigh the skills by the interest of their states: the mean POI of the states labelled
    with each skill, softmax(log(mean POI) / temperature), mixed with the uniform distribution.
    A skill no state is labelled with gets the mean POI of all states. Returns (probs, POI per skill)."""
    totals = torch.zeros(num_skills, dtype=poi.dtype).index_add_(0, labels, poi)
    counts = torch.bincount(labels, minlength=num_skills).to(poi.dtype)
    per_skill = torch.where(counts > 0, totals / counts.clamp(min=1), poi.mean())
    guided = torch.softmax(torch.log(per_skill + 1e-12) / temperature, dim=0)
    return uniform_weight / num_skills + (1.0 - uniform_weight) * guided, per_skill


def mix_advantages(advantages, diayn_advantages, skill_rows, ext_share, diayn_share, norm):
    """The advantage the policy follows: at the steps of envs with skills (`skill_rows`), `ext_share` of the task's
    and `diayn_share` of the DIAYN advantage, at the others the task's alone (none while the task's weight is 0:
    no task reward reaches the agent, its advantage is critic noise). With `norm`, each kind is first
    normalised on its own (the weights weigh them, whatever their scales), the DIAYN one over the steps with skills
    (one such step or none: no spread to normalise by, weight 0)."""
    if norm:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        with_skills = diayn_advantages[skill_rows]
        if len(with_skills) > 1:
            diayn_advantages = (diayn_advantages - with_skills.mean()) / (with_skills.std() + 1e-8)
        else:
            diayn_advantages = torch.zeros_like(diayn_advantages)
    task_alone = advantages if ext_share else torch.zeros_like(advantages)
    return torch.where(skill_rows, ext_share * advantages + diayn_share * diayn_advantages, task_alone)


def compute_gae(rewards, values, next_value, final_values, terminations, dones, gamma, gae_lambda):
    """Generalised advantage estimation over a (num_steps, num_envs) rollout, and where each step bootstraps.

    After step t comes `values[t + 1]` (after the last step, `next_value`, of shape (1, num_envs)), except where
    the episode ended at t: a terminated step bootstraps from nothing (`terminations[t]`), a truncated one (done,
    not terminated) from the value of its final observation, `final_values[t]` (which the rollout computes: the
    reset observation took its place). `dones[t]` (terminated or truncated) cuts the trace.
    """
    next_values = torch.cat([values[1:], next_value])
    next_values = torch.where(dones.bool() & ~terminations.bool(), final_values, next_values)
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(rewards[0])
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * next_values[t] - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def clipped_losses(ratio, advantages, new_values, old_values, returns, args):
    """PPO's clipped surrogate policy loss and its value loss (with `args.clip_vloss` clipped around the rollout's
    values, as CleanRL's), each a mean over the minibatch; `ratio` is pi_new / pi_old of the actions taken, both clips
    at `args.clip_coef`."""
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    if not args.clip_vloss:
        return pg_loss, 0.5 * ((new_values - returns) ** 2).mean()
    v_loss_unclipped = (new_values - returns) ** 2
    v_clipped = old_values + torch.clamp(new_values - old_values, -args.clip_coef, args.clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    return pg_loss, 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()


if __name__ == "__main__":
    args, checkpoint = parse_args(Args, RANGES, fill_in_defaults)
    env_id = resolve_env_id(args.env)
    with Run(args, checkpoint) as run:  # the run folder, its writer, checkpoints and ending: common/runs.py
        writer = run.writer

        # TRY NOT TO MODIFY: seeding
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        torch.set_num_threads(args.torch_threads)
        torch.backends.cudnn.deterministic = args.torch_deterministic
        device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

        # env setup: the one-hot view, SAME_STEP autoreset (the true final observation in infos["final_obs"])
        envs = make_vector_env(env_id, args.num_envs, args.vector_env, args.capture_video, run.dir)
        run.callback(envs.close)
        assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"
        obs_dim = int(envs.single_observation_space.shape[0])
        num_actions = int(envs.single_action_space.n)
        phase_colors = list(args.correct_key_colors)
        if phase_colors:
            envs.call("set_correct_key_color", phase_colors[0])
        info_keys = () if args.model_target == "forward" else (args.model_target,)

        # optimisation: the first layers read only the columns of the view the env can set (common/columns.py)
        columns = view_columns(env_id)
        # and the skill's
        agent_columns = None if columns is None else [*columns, *range(obs_dim, obs_dim + args.num_skills)]
        agent = Agent(obs_dim + args.num_skills, num_actions, args.bf16 == "on", columns=agent_columns).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
        num_members = args.ensemble_size if args.interest_field == "ensemble" else 1
        model_columns = None if args.state_sampler == "vae" else columns  # the VAE's samples can set any column
        model = ExternalModel(
            obs_dim,
            num_actions,
            target=args.model_target,
            hidden_sizes=args.model_hidden_sizes,
            dropout=args.model_dropout,
            gaussian=args.model_gaussian,
            nll_beta=args.model_nll_beta,
            faithful=args.model_faithful,
            num_members=num_members,
            columns=model_columns,
        ).to(device)
        model_optimizer = optim.Adam(model.parameters(), lr=args.model_learning_rate, fused=True)
        # logging's own draws: training ignores --eval-every
        eval_generator = torch.Generator(device).manual_seed(args.seed)
        grid_size = gym.spec(env_id).kwargs["size"] if is_color_door_key(env_id) else 0  # its info has the cells
        disc = discriminator(obs_dim if args.disc_input == "view" else 2 * grid_size, args.num_skills).to(device)
        disc_optimizer = optim.Adam(disc.parameters(), lr=args.disc_learning_rate, fused=True)
        vae = StateVAE(obs_dim, args.vae_latent).to(device)
        vae_optimizer = optim.Adam(vae.parameters(), lr=args.disc_learning_rate, fused=True)

        # what a checkpoint saves by state dict (the loop's values: loop_state, below)
        stateful = dict(
            agent=agent,
            optimizer=optimizer,
            model=model,
            model_optimizer=model_optimizer,
            disc=disc,
            disc_optimizer=disc_optimizer,
            vae=vae,
            vae_optimizer=vae_optimizer,
            eval_generator=eval_generator,
        )

        # the external model's held-out sets of each phase (the same for every seed; each distinct input evaluated once)
        heldout_eval = HeldoutEval.for_run(model, model_targets, env_id, args, device)

        # ALGO Logic: Storage setup
        obs = torch.zeros((args.num_steps, args.num_envs, obs_dim)).to(device)
        actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
        logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
        rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
        terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
        dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
        values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        diayn_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        final_diayn_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        skills = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
        skill_ends = torch.zeros((args.num_steps, args.num_envs)).to(device)  # a skill's last step within an episode
        # its skill began this rollout
        fresh = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool).to(device)
        next_observations = torch.zeros((args.num_steps, args.num_envs, obs_dim)).to(device)
        next_cells = torch.zeros((args.num_steps, args.num_envs, 2), dtype=torch.long).to(device)
        target_size = obs_dim if args.model_target == "forward" else 1
        targets = torch.zeros((args.num_steps, args.num_envs, target_size)).to(device)

        # TRY NOT TO MODIFY: start the game, or go on from the checkpoint
        iteration = 0
        global_step = 0
        phase = 0
        next_obs, infos = envs.reset(seed=args.seed)
        next_obs = torch.tensor(next_obs, device=device)
        skill_scale = next_obs.norm(dim=-1).mean().item()  # sqrt(147) for one-hot views
        next_info = torch.tensor(infos[info_keys[0]], device=device) if info_keys else None
        skill_probs = torch.full((args.num_skills,), 1.0 / args.num_skills)
        next_skill = torch.multinomial(skill_probs, args.num_envs, replacement=True).to(device)
        skill_env = torch.arange(args.num_envs, device=device) < args.skill_envs  # the others carry no skill
        next_skill[~skill_env] = args.num_skills
        skill_age = torch.zeros(args.num_envs, dtype=torch.long, device=device)  # steps taken with the skill
        visits = torch.zeros(args.num_skills, grid_size, grid_size)  # per skill and cell, since the last map
        recent_returns = deque(maxlen=100)  # the task's episodic returns, for --diayn-after-return

        if checkpoint:  # last: building the networks drew from the random states it restores
            state = restore_checkpoint(checkpoint, stateful, device)
            set_env_state(envs, state.pop("envs"))
            iteration, global_step, phase = state["iteration"], state["global_step"], state["phase"]
            next_obs, next_info = state["next_obs"], state["next_info"]
            skill_probs, next_skill = state["skill_probs"], state["next_skill"]
            skill_age = state["skill_age"]
            visits, recent_returns = state["visits"], state["recent_returns"]
        heldout = heldout_eval.load(phase)

        def loop_state():
            """What the loop carries from one iteration to the next, as a checkpoint saves it."""
            return dict(
                iteration=iteration,
                global_step=global_step,
                phase=phase,
                next_obs=next_obs,
                next_info=next_info,
                skill_probs=skill_probs,
                next_skill=next_skill,
                skill_age=skill_age,
                visits=visits,
                recent_returns=recent_returns,
                envs=env_state(envs),
            )

        run.start_loop(global_step)  # the clock starts; a stop now waits for the iteration's checkpoint
        for iteration in range(iteration + 1, args.num_iterations + 1):
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                lrnow = frac * args.learning_rate
                optimizer.param_groups[0]["lr"] = lrnow

            iteration_returns = []
            skill_env_returns = []  # the task returns of the episodes that ended in envs with skills
            skill_starts = torch.zeros(args.num_skills)
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                if phase < len(args.change_steps) and global_step > args.change_steps[phase]:
                    phase += 1  # applies at each env's next reset
                    envs.call("set_correct_key_color", phase_colors[phase])
                    heldout = heldout_eval.load(phase)
                obs[step] = next_obs
                skills[step] = next_skill
                fresh[step] = skill_age <= step  # all its steps so far are in this rollout

                # ALGO LOGIC: action logic
                with torch.no_grad():
                    action, logprob, _, value, diayn_value = agent.get_action_and_value(
                        agent_input(next_obs, next_skill, args.num_skills, skill_scale)
                    )
                    values[step] = value.flatten()
                    diayn_values[step] = diayn_value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs_np, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
                done = np.logical_or(termination, truncation)
                real_next_obs = torch.tensor(true_next_obs(next_obs_np, infos, done), device=device)
                # SKILL LOGIC: a skill also ends within an episode after --skill-steps steps
                skill_age += 1
                done_now = torch.as_tensor(done, device=device)
                switch = (skill_age >= args.skill_steps) & ~done_now if args.skill_steps else torch.zeros_like(done_now)
                switch &= next_skill < args.num_skills  # an env without a skill (see --skill-envs) has none to end
                skill_ends[step] = switch.float()
                # a truncated episode bootstraps both returns from its final observation; an ended skill its DIAYN
                # return, and with --diayn-bootstrap-at-termination a terminated episode too (final_values is read
                # only where an episode was truncated)
                ended = done if args.diayn_bootstrap_at_termination else truncation
                bootstrap = torch.as_tensor(ended, device=device) | switch
                if bootstrap.any():
                    with torch.no_grad():
                        x = agent_input(real_next_obs[bootstrap], next_skill[bootstrap], args.num_skills, skill_scale)
                        final_value, final_diayn_value = agent.get_value(x)
                        final_values[step, bootstrap] = final_value.flatten()
                        final_diayn_values[step, bootstrap] = final_diayn_value.flatten()
                redraw = (done_now & skill_env) | switch  # a new skill for each episode and skill that ended
                if args.skill_then_task:  # the episode's skill is over: the task alone until the episode ends
                    next_skill[switch] = args.num_skills
                    redraw = done_now & skill_env
                if redraw.any():
                    new = torch.multinomial(skill_probs, int(redraw.sum()), replacement=True)
                    next_skill[redraw] = new.to(device)
                    skill_age[redraw] = 0
                    skill_starts += torch.bincount(new, minlength=args.num_skills)
                rewards[step] = torch.tensor(reward, device=device).view(-1)
                if args.no_task_reward or global_step < args.reward_warmstart:
                    rewards[step] = 0.0
                terminations[step] = torch.tensor(termination, device=device, dtype=torch.float32)
                dones[step] = torch.tensor(done, device=device, dtype=torch.float32)
                targets[step] = model_targets(args.model_target, obs[step], real_next_obs, next_info)
                next_observations[step] = real_next_obs
                if grid_size:  # the cells a step led to, for the x-y discriminator and the visitation maps
                    next_cells[step] = torch.as_tensor(cells_of(infos, done), device=device)
                next_obs = torch.tensor(next_obs_np, device=device)
                next_info = torch.tensor(infos[info_keys[0]], device=device) if info_keys else None

                if "final_info" in infos and "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.flatnonzero(infos["final_info"]["_episode"]):
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
                        iteration_returns.append(float(episode["r"][i]))
                        recent_returns.append(float(episode["r"][i]))
                        if i < args.skill_envs:  # the skill-conditioned agent's own task return
                            skill_env_returns.append(float(episode["r"][i]))
            # live: the skills count while the task is done, and give way to it when it is not
            full = len(recent_returns) == recent_returns.maxlen
            diayn_on = (
                args.diayn_after_return == 0
                or args.no_task_reward
                or (full and float(np.mean(recent_returns)) >= args.diayn_after_return)
            )
            diayn_weight = args.diayn_coef if diayn_on else 0.0

            if args.skill_interest == "error":  # what the model had not yet learned of this rollout
                rollout_error = prediction_errors(
                    model, obs.reshape(-1, obs_dim), actions.reshape(-1), targets.reshape(-1, targets.shape[-1])
                )

            # EXTERNAL MODEL LOGIC: train on this rollout's transitions, evaluate on the held-out set
            model_train_loss = train_external_model(
                model,
                model_optimizer,
                obs.reshape(-1, obs_dim),
                actions.reshape(-1),
                targets.reshape(-1, targets.shape[-1]),
                args.model_epochs,
                args.model_batch_size,
            )
            writer.add_scalar("external_model/train_loss", model_train_loss, global_step)
            if iteration % args.eval_every == 0 or iteration == args.num_iterations:
                heldout_eval.log(writer, global_step, obs, actions)
                eval_poi = poi_values(model, heldout["obs"], heldout["actions"], args.mc_samples, eval_generator)
                writer.add_scalar("poi/eval_mean", eval_poi[heldout["inverse"]].mean().item(), global_step)

            # DIAYN LOGIC: reward from the discriminator as it was during the rollout, then its update; the steps
            # with a skill only (with --skill-then-task a rollout can have none: then the discriminator, the VAE and
            # the skills' weights stay as they are)
            b_skill_rows = skills.reshape(-1) < args.num_skills
            with_skills = bool(b_skill_rows.any())
            flat_skills = skills.reshape(-1)[b_skill_rows]
            flat_next_obs = next_observations.reshape(-1, obs_dim)[b_skill_rows]
            flat_next_cells = next_cells.reshape(-1, 2)[b_skill_rows]
            seen = disc_inputs(flat_next_obs, flat_next_cells, args.disc_input, grid_size)
            diayn_reward = torch.zeros(args.batch_size, device=device)
            diayn_reward[b_skill_rows] = diayn_rewards(disc, seen, flat_skills, args.num_skills)
            diayn_reward = diayn_reward.reshape(args.num_steps, args.num_envs)
            if with_skills:
                disc_loss, disc_correct = train_discriminator(
                    disc, disc_optimizer, seen, flat_skills, args.model_batch_size
                )
            if grid_size:  # where each skill goes: a map per skill, logged with the evaluation
                x, y = flat_next_cells.cpu().unbind(-1)
                visits.index_put_((flat_skills.cpu(), y, x), torch.ones(len(x)), accumulate=True)
                if iteration % args.eval_every == 0 or iteration == args.num_iterations:
                    writer.add_image("skills/visitation", visitation_image(visits), global_step)
                    visits.zero_()
            if args.state_sampler == "vae" and with_skills:
                vae_loss = train_vae(vae, vae_optimizer, obs.reshape(-1, obs_dim)[b_skill_rows], args.model_batch_size)

            # SKILL LOGIC: weigh the skills by the interest of sampled states, each with the skill that goes there
            if with_skills:
                if args.state_sampler == "vae":
                    states = vae.sample(args.skill_states)
                    with torch.no_grad():
                        labels = disc(disc_inputs(states, None, args.disc_input, grid_size)).argmax(-1)
                else:
                    skill_rows = torch.nonzero(b_skill_rows).flatten()  # steps with a skill
                    rows = skill_rows[torch.randint(len(skill_rows), (args.skill_states,))]
                    states, labels = obs.reshape(-1, obs_dim)[rows], skills.reshape(-1)[rows]
                if args.skill_interest == "error":
                    poi = rollout_error[rows]
                else:
                    random_actions = torch.randint(num_actions, (args.skill_states,), device=device)
                    poi = poi_values(model, states, random_actions, args.mc_samples)
                guided_probs, skill_poi = skill_distribution(
                    labels.cpu(), poi.cpu(), args.num_skills, args.uniform_prior_weight, args.skill_temperature
                )
                uniform = torch.full((args.num_skills,), 1.0 / args.num_skills)
                skill_probs = uniform if global_step < args.skill_warmstart else guided_probs

            # bootstrap value if not done
            with torch.no_grad():
                x = agent_input(next_obs, next_skill, args.num_skills, skill_scale)
                next_value, next_diayn_value = agent.get_value(x)
                advantages, returns = compute_gae(
                    rewards,
                    values,
                    next_value.reshape(1, -1),
                    final_values,
                    terminations,
                    dones,
                    args.gamma,
                    args.gae_lambda,
                )
                # the DIAYN return is the skill's: it also stops where a skill ends within an episode; with
                # --diayn-bootstrap-at-termination no episode end cuts it without a bootstrap
                skill_dones = torch.maximum(dones, skill_ends)
                diayn_terminations = (
                    torch.zeros_like(terminations) if args.diayn_bootstrap_at_termination else terminations
                )
                diayn_advantages, diayn_returns = compute_gae(
                    diayn_reward,
                    diayn_values,
                    next_diayn_value.reshape(1, -1),
                    final_diayn_values,
                    diayn_terminations,
                    skill_dones,
                    args.gamma,
                    args.gae_lambda,
                )

            # flatten the batch
            b_obs = agent_input(obs.reshape((-1, obs_dim)), skills.reshape(-1), args.num_skills, skill_scale)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_diayn_advantages = diayn_advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_diayn_returns = diayn_returns.reshape(-1)

            # without a task reward (--no-task-reward, the warm start) the task advantage is critic noise: weight 0
            ext_weight = 0.0 if args.no_task_reward or global_step < args.reward_warmstart else args.ext_coef
            # the weights as shares of one (Adam undoes a loss's scale, not the ratio of its terms): the mix's std is 1
            # where the two agree, less where not (0.75 if uncorrelated at 2 : 1); with the other weight 0 it is PPO's
            weight_sum = ext_weight + diayn_weight
            ext_share, diayn_share = (ext_weight / weight_sum, diayn_weight / weight_sum) if weight_sum else (0.0, 0.0)

            # Optimizing the policy and value network
            b_inds = np.arange(args.batch_size)
            clipfracs = []
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, args.batch_size, args.minibatch_size):
                    end = start + args.minibatch_size
                    mb_inds = b_inds[start:end]

                    _, newlogprob, entropy, newvalue, new_diayn_value = agent.get_action_and_value(
                        b_obs[mb_inds], b_actions[mb_inds]
                    )
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # calculate approx_kl http://joschu.net/blog/kl-approx.html
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                    mb_advantages = mix_advantages(
                        b_advantages[mb_inds],
                        b_diayn_advantages[mb_inds],
                        b_skill_rows[mb_inds],
                        ext_share,
                        diayn_share,
                        args.norm_adv,
                    )

                    pg_loss, v_loss = clipped_losses(
                        ratio, mb_advantages, newvalue.view(-1), b_values[mb_inds], b_returns[mb_inds], args
                    )
                    diayn_v_loss = 0.5 * ((new_diayn_value.view(-1) - b_diayn_returns[mb_inds]) ** 2).mean()

                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                    loss = loss + diayn_v_loss * args.vf_coef

                    optimizer.zero_grad()
                    check_finite("PPO loss", loss)
                    loss.backward()
                    # clipped apart, so a surge of the intrinsic value's gradient never shrinks the task update
                    int_grad_norm = nn.utils.clip_grad_norm_(agent.critic_int.parameters(), args.max_grad_norm)
                    check_finite("intrinsic value loss's gradient norm", int_grad_norm)
                    grad_norm = nn.utils.clip_grad_norm_(agent.task_parameters(), args.max_grad_norm)
                    check_finite("PPO loss's gradient norm", grad_norm)
                    optimizer.step()

                if args.target_kl is not None and approx_kl > args.target_kl:
                    break

            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            sps = run.sps(global_step)
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("charts/phase", phase, global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", int(sps), global_step)
            writer.add_scalar("losses/diayn_value_loss", diayn_v_loss.item(), global_step)
            writer.add_scalar("diayn/weight", diayn_weight, global_step)
            # the share of the rollout's steps with a skill
            writer.add_scalar("diayn/skill_share", b_skill_rows.float().mean().item(), global_step)
            writer.add_scalar("diayn/skill_env_episodes", len(skill_env_returns), global_step)
            if skill_env_returns:
                writer.add_scalar("diayn/skill_env_return", np.mean(skill_env_returns), global_step)
            if with_skills:  # what the rollout's steps with a skill gave
                writer.add_scalar("poi/mean", poi.mean().item(), global_step)
                writer.add_scalar("poi/max", poi.max().item(), global_step)
                writer.add_scalar(
                    "diayn/reward_mean", diayn_reward.reshape(-1)[b_skill_rows].mean().item(), global_step
                )
                writer.add_scalar("diayn/disc_loss", disc_loss, global_step)
                writer.add_scalar("diayn/disc_accuracy", disc_correct.float().mean().item(), global_step)
                fresh_with_skills = fresh.reshape(-1)[b_skill_rows]
                if fresh_with_skills.any():  # skills the discriminator has never trained on: no episode to recognise
                    accuracy = disc_correct[fresh_with_skills].float().mean().item()
                    writer.add_scalar("diayn/disc_accuracy_fresh", accuracy, global_step)
                if args.state_sampler == "vae":
                    writer.add_scalar("diayn/vae_loss", vae_loss, global_step)
                for k in range(args.num_skills):
                    writer.add_scalar(f"poi/skill_{k}", skill_poi[k].item(), global_step)
            starts = skill_starts / skill_starts.sum().clamp(min=1)
            for k in range(args.num_skills):
                writer.add_scalar(f"skills/frequency_{k}", starts[k].item(), global_step)
                writer.add_scalar(f"skills/prob_{k}", skill_probs[k].item(), global_step)
            mean_return = np.mean(iteration_returns) if iteration_returns else float("nan")
            say(progress_line(global_step, args.total_timesteps, sps, mean_return, model_train_loss))
            run.end_iteration(iteration, global_step, stateful, loop_state)  # the checkpoint when due; a stop if asked

        if args.save_model:
            meta = dict(env=args.env, observation="one_hot_view", noise="gumbel", noise_size=num_actions)
            meta["correct_key_color"] = phase_colors[-1] if phase_colors else None
            meta["condition"] = dict(kind="one_hot", probs=skill_probs.tolist(), scale=skill_scale)
            meta["condition"].update(steps=args.skill_steps, then_task=args.skill_then_task)  # when a skill ends
            run.save_models(agent, obs_dim, meta, agent=agent, external_model=model, discriminator=disc)
