# docs: docs/algorithms/ppo_poi_progress.md
import copy
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
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical

from common.checkpoint import env_state, restore_checkpoint, set_env_state
from common.columns import keep_columns, select_columns
from common.console import say
from common.heldout import HeldoutEval
from common.interest_by_action import log_interest_by_action
from common.precision import resolve_bf16
from common.runs import Run, RunArgs, check_finite, parse_args, progress_line
from envs import fill_in_env_defaults, is_color_door_key, make_vector_env, resolve_env_id, true_next_obs, view_columns


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
    model_data: Literal["rollout", "uniform"] = "rollout"
    """rollout: the model trains on each rollout's transitions; uniform: on as many minibatches drawn uniformly from a
    buffer of the most recent --replay-size transitions (`ppo_poi_replay --model-data uniform`'s training)"""
    replay_size: int = 32768
    """transitions the buffer of --model-data uniform holds (the most recent; 16 rollouts at the default sizes)"""

    # POI arguments
    interest: Literal["auto", "error", "excess", "progress", "noise"] = "auto"
    """error: a transition's loss before the model's update on the rollout (surprise); excess (needs
    --model-gaussian): its squared error in excess of the variance the model predicts for it, before the update (what
    the model gets wrong beyond the noise it knows of); progress: its loss under a lagged copy of the model minus its
    loss under the model (learning progress, Kim et al. 2020); noise: a control,
    a uniform draw in [0, 1) for every transition, which says nothing about the model or the data; auto: error for an
    info target, progress for the forward model (whose error stays high where the partial view cannot show the outcome)"""
    progress_tau: float = 0.05
    """per rollout, the weight of the model's new weights in the lagged copy (it lags by about 1 / tau rollouts)"""
    progress_lag: int = 0
    """progress against the model as it was this many rollouts ago (a snapshot: it reacts within that many rollouts);
    0: against the --progress-tau lagged copy"""
    int_coef: float = 1.0
    """weight of the intrinsic advantages (each kind normalised per minibatch; the weights mix as shares of their sum)"""
    ext_coef: float = 2.0
    """weight of the task advantages (each kind normalised per minibatch; the weights mix as shares of their sum)"""
    int_gamma: float = 0.99
    """discount of the non-episodic intrinsic return"""
    int_scale_decay: float = 0.95
    """per rollout, the weight of the past in the intrinsic reward's scale (it forgets in about 1 / (1 - decay) rollouts)"""
    int_scale: Literal["return", "reward"] = "return"
    """the intrinsic reward is the interest over a moving std: of the discounted intrinsic return (`return`, RND's: a
    rise of interest is a smaller reward for many rollouts) or of the interest within each rollout (`reward`: where
    the interest rose, a larger reward for some rollouts); IntrinsicRewardScale"""
    reward_warmstart: int = 0
    """no extrinsic reward reaches the agent before this global step"""
    no_task_reward: bool = False
    """if toggled, the agent learns from the intrinsic reward alone"""
    int_after_return: float = 0.8
    """the intrinsic advantage counts only once the mean task return of the last 100 episodes has reached this, the
    task first (0: from the start; with --no-task-reward always from the start)"""

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
        "model_batch_size eval_every eval_steps eval_episode_steps replay_size torch_threads"
    ),
    "(0, inf)": "learning_rate clip_coef max_grad_norm target_kl model_learning_rate",
    "[0, 4294967295]": "seed",  # numpy seeds its generator with 32 bits
    "[0, inf)": (
        "checkpoint_every ent_coef vf_coef model_nll_beta eval_changed_min int_coef ext_coef "
        "int_after_return progress_lag reward_warmstart"
    ),
    "(0, 1]": "gamma int_gamma progress_tau",
    "[0, 1]": "gae_lambda",
    "[0, 1)": "model_dropout int_scale_decay",
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
    if args.model_data == "uniform" and args.replay_size < args.batch_size:
        raise ValueError(
            f"--replay-size={args.replay_size} must hold at least one rollout ({args.batch_size} transitions)"
        )
    color_door_key = is_color_door_key(resolve_env_id(args.env))
    if args.model_target == "auto":
        args.model_target = "key_distance" if color_door_key else "forward"
    if args.model_target != "forward" and not color_door_key:
        raise ValueError(f"--model-target {args.model_target} needs a ColorDoorKey env (its info), got {args.env}")
    if args.interest == "auto":  # each target's interest that kept the task in the interest study
        args.interest = "progress" if args.model_target == "forward" else "error"
    if args.interest == "excess" and not args.model_gaussian:
        raise ValueError("--interest excess needs --model-gaussian (the variance it subtracts is the model's)")
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


class ExternalModel(nn.Module):
    """The model the agent feeds with data: an MLP on the observation (and the one-hot action).

    `target="forward"`: learns `next_obs - obs`; `predict` returns `obs + delta`.
    Otherwise it regresses one info value of the observation (`key_distance`, `agent_dir`).
    Deterministic (MSE) or Gaussian (mean and clamped log-std heads, beta-NLL: plain NLL
    shrinks the std of easy dimensions and then barely moves the mean of the hard ones;
    `faithful`: the mean learns as an MSE model's, the log-std head beside it without moving it).
    """

    LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0

    def __init__(
        self,
        obs_dim,
        num_actions,
        target,
        hidden_sizes,
        dropout,
        gaussian=False,
        nll_beta=0.5,
        faithful=False,
        columns=None,
    ):
        super().__init__()
        columns = None if columns is None else [int(c) for c in columns]
        # what load() needs
        self.config = dict(obs_dim=obs_dim, num_actions=num_actions, target=target, hidden_sizes=tuple(hidden_sizes))
        self.config.update(dropout=dropout, gaussian=gaussian, nll_beta=nll_beta, faithful=faithful, columns=columns)
        self.num_actions, self.target, self.nll_beta = num_actions, target, nll_beta
        self.faithful = faithful  # the log-std learns from detached features: see loss
        self.register_buffer("columns", None if columns is None else torch.tensor(columns))  # see keep_columns
        in_dim = obs_dim + (num_actions if target == "forward" else 0)
        out_dim = obs_dim if target == "forward" else 1
        kept = None if columns is None else columns + list(range(obs_dim, in_dim))  # the action's columns all count
        layers = []
        for size in hidden_sizes:
            layers += [nn.Linear(in_dim, size), nn.ReLU(), nn.Dropout(dropout)]
            in_dim = size
        keep_columns(layers[0], kept)
        self.body = nn.Sequential(*layers)
        self.mean = nn.Linear(in_dim, out_dim)
        self.log_std = nn.Linear(in_dim, out_dim) if gaussian else None

    def inputs(self, obs, actions):
        """What the first layer reads: the observation's `columns` (and the one-hot action of a forward model)."""
        obs = select_columns(obs, self.columns)
        if self.target != "forward":
            return obs
        return torch.cat([obs, torch.eye(self.num_actions, device=obs.device)[actions.long()]], dim=-1)

    def forward(self, obs, actions):
        """Mean and log-std (None when deterministic) of the target: delta or info value."""
        h = self.body(self.inputs(obs, actions))
        if self.log_std is None:
            return self.mean(h), None
        return self.mean(h), self.log_std(h.detach() if self.faithful else h).clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)

    def per_sample_loss(self, obs, actions, targets):
        """MSE, or Gaussian beta-NLL without its constant, averaged over output dimensions."""
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
        """The predicted next observation (forward model) or info value, with dropout off."""
        was_training = self.training
        self.eval()
        mean, _ = self(obs, actions)
        self.train(was_training)
        return obs + mean if self.target == "forward" else mean

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
    """Mini-batch passes over one rollout's transitions; returns the mean training loss."""
    model.train()
    losses = []
    for _ in range(epochs):
        for idx in torch.randperm(len(obs)).split(batch_size):
            loss = model.per_sample_loss(obs[idx], actions[idx], targets[idx]).mean()
            optimizer.zero_grad()
            check_finite("external model's loss", loss)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return float(np.mean(losses))


class ReplayBuffer:
    """The most recent `size` transitions (views stored as bytes) for the external model, each
    with a priority: the model's loss on it when last trained on, the largest so far for a new
    one (Schaul et al. 2016's proportional prioritised replay)."""

    def __init__(self, size, obs_dim, target_dim, device):
        self.obs = torch.zeros((size, obs_dim), dtype=torch.uint8, device=device)
        self.actions = torch.zeros(size, dtype=torch.long, device=device)
        self.targets = torch.zeros((size, target_dim), device=device)
        self.priorities = torch.zeros(size, device=device)
        self.size, self.count, self.next = size, 0, 0

    def add(self, obs, actions, targets):
        idx = (self.next + torch.arange(len(obs), device=obs.device)) % self.size
        new_priority = self.priorities[: self.count].max() if self.count else torch.tensor(1.0)
        self.obs[idx], self.actions[idx], self.targets[idx] = obs.to(torch.uint8), actions, targets
        self.priorities[idx] = new_priority
        self.next, self.count = int(idx[-1] + 1) % self.size, min(self.count + len(obs), self.size)

    def sample(self, batch_size, alpha, beta, prioritised):
        """Indices drawn with replacement, P(i) = p_i^alpha / sum_j p_j^alpha (uniform when not
        prioritised), and their importance weights (N P(i))^-beta / max_j (N P(j))^-beta."""
        if not prioritised:
            return torch.randint(self.count, (batch_size,), device=self.obs.device), torch.ones(
                batch_size, device=self.obs.device
            )
        probs = self.priorities[: self.count] ** alpha
        probs = probs / probs.sum()
        idx = torch.multinomial(probs, batch_size, replacement=True)
        weights = (self.count * probs[idx]) ** -beta
        return idx, weights / (self.count * probs.min()) ** -beta

    def update(self, idx, losses, floor=1e-6):
        """The drawn transitions' priorities: their losses, a negative one (a Gaussian model's NLL) as 0, plus a
        floor, so that a transition the model has learned is still drawn, rarely."""
        self.priorities[idx] = losses.detach().clamp(min=0) + floor


def train_from_replay(model, optimizer, buffer, num_updates, batch_size, alpha, beta, prioritised):
    """`num_updates` minibatch steps on transitions drawn from the buffer, each loss weighted by
    its importance weight; the buffer updates the drawn transitions' priorities from their losses.
    Returns the mean (unweighted) loss of the drawn transitions."""
    model.train()
    losses = []
    for _ in range(num_updates):
        idx, weights = buffer.sample(batch_size, alpha, beta, prioritised)
        per_sample = model.per_sample_loss(buffer.obs[idx].float(), buffer.actions[idx], buffer.targets[idx])
        loss = (weights * per_sample).mean()
        optimizer.zero_grad()
        check_finite("external model's loss", loss)
        loss.backward()
        optimizer.step()
        buffer.update(idx, per_sample)
        losses.append(per_sample.mean().item())
    return float(np.mean(losses))


@torch.no_grad()
def eval_predictions(model, obs, actions, inverse=None):
    """`model`'s (mean, log-std) of each transition, dropout off. With `inverse`, `obs` and `actions`
    are distinct inputs and transition i is input inverse[i]."""
    was_training = model.training
    model.eval()
    mean, log_std = model(obs, actions)
    model.train(was_training)
    if inverse is not None:
        mean, log_std = mean[inverse], None if log_std is None else log_std[inverse]
    return mean, log_std


def transition_losses(model, obs, actions, targets, inverse=None):
    """Each transition's loss under `model`, dropout off: how wrong its prediction is."""
    return model.loss(*eval_predictions(model, obs, actions, inverse), targets)


class LaggedModel:
    """An exponential moving average of the model's weights, `tau` of the new weights per update:
    the model as it was about 1 / tau updates ago (Kim et al. 2020's gamma-lagged copy)."""

    def __init__(self, model, tau):
        self.model, self.tau = copy.deepcopy(model).requires_grad_(False), tau

    @torch.no_grad()
    def update(self, model):
        for lagged, current in zip(self.model.parameters(), model.parameters(), strict=True):
            lagged.lerp_(current, self.tau)


class SnapshotModel:
    """The model as it was `lag` updates ago (the oldest kept while fewer have been made): learning
    progress over a window of whole rollouts, which reacts to a change within `lag` rollouts, where the
    exponential average of LaggedModel spreads it over ~1 / tau (and a tau large enough to react fast
    leaves little difference to measure). On white noise both models err alike in expectation."""

    def __init__(self, model, lag):
        self.model = copy.deepcopy(model).requires_grad_(False)
        self.states = deque([copy.deepcopy(model.state_dict())], maxlen=lag)

    @torch.no_grad()
    def update(self, model):
        self.states.append(copy.deepcopy(model.state_dict()))
        self.model.load_state_dict(self.states[0])


def excess_errors(model, obs, actions, targets, inverse=None):
    """Each transition's squared error in excess of the variance the Gaussian model predicts for it,
    averaged over output dimensions (dropout off): on a target's unpredictable part the model learns
    the noise as variance and this is 0 in expectation; where the world changed it is not. Not clipped
    at 0: a noisy transition's excess is as often below 0 as above, and clipping would pay for noise."""
    mean, log_std = eval_predictions(model, obs, actions, inverse)
    return ((targets - mean) ** 2 - (2 * log_std).exp()).mean(-1)


def interest_values(interest, model, lagged, obs, actions, targets, inverse=None, loss_before=None, generator=None):
    """Interest of each transition from its observed target. progress: loss under the lagged
    copy minus loss under the model (positive where the model has just learned something; it
    rises after a change of the world, while the model re-learns); error, excess: `loss_before`, the
    value before the model's update on these transitions, or the model's now when not given (the
    loss; the squared error beyond the predicted variance); noise: uniform draws from `generator`,
    independent of everything else (a control)."""
    if interest == "noise":
        return torch.rand(len(targets), generator=generator, device=targets.device)
    if interest in ("error", "excess") and loss_before is not None:
        return loss_before
    if interest == "error":
        return transition_losses(model, obs, actions, targets, inverse)
    if interest == "excess":
        return excess_errors(model, obs, actions, targets, inverse)
    return transition_losses(lagged.model, obs, actions, targets, inverse) - transition_losses(
        model, obs, actions, targets, inverse
    )


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


def intrinsic_advantages(int_rewards, int_values, next_int_value, int_gamma, gae_lambda):
    """GAE of the intrinsic reward, non-episodic: its return flows on across episode ends
    (an episode's end is no reason to stop seeking data for the model)."""
    no_ends = torch.zeros_like(int_rewards)
    return compute_gae(int_rewards, int_values, next_int_value, no_ends, no_ends, no_ends, int_gamma, gae_lambda)


class IntrinsicRewardScale:
    """The intrinsic reward's divisor (--int-scale), its moments an exponential moving average over rollouts
    (bias-corrected, as Adam's; a rollout weighs decay^age) of a per-step quantity:
    `return`: the discounted intrinsic return (one per env, flowing on across episode ends; RND's). A rise of
    interest is no larger reward: the moments mix the returns before and after it, whose gap counts as spread long
    after 1 / (1 - decay) rollouts (test_poi: x5 everywhere, ninefold less, still less 100 rollouts on).
    `reward`: the interest less its rollout's mean, so the std is that of each rollout's own spread, averaged: no gap
    between rollouts counts, and a rise is a larger reward while the average catches up (x5 everywhere: 3.4 times
    the rollout after, fading over ~1 / (1 - decay) rollouts; test_poi): a larger reward where the interest rose
    (the mean reward can still fall when the rise is in a few transitions: their spread raises the std too)."""

    rule = "return"  # the rule of a checkpoint written before there was a choice

    def __init__(self, num_envs, gamma, decay, device, rule="return"):
        self.gamma, self.decay, self.rule = gamma, decay, rule
        self.returns = torch.zeros(num_envs, device=device)
        self.moments = torch.zeros(2, dtype=torch.float64)  # of the quantity and its square
        self.weight = 0.0  # of the moments so far (bias correction, as Adam's)

    def update(self, rewards):
        """Feed a (num_steps, num_envs) block of rewards; returns the std after it."""
        if self.rule == "reward":
            seen = rewards - rewards.mean()
        else:
            seen = torch.empty_like(rewards)
            for t, reward in enumerate(rewards):
                self.returns = self.returns * self.gamma + reward
                seen[t] = self.returns
        batch = torch.stack([seen.mean(), seen.pow(2).mean()]).double().cpu()
        self.moments = self.decay * self.moments + (1.0 - self.decay) * batch
        self.weight = self.decay * self.weight + (1.0 - self.decay)
        mean, second = (self.moments / self.weight).tolist()
        return max(second - mean**2, 0.0) ** 0.5


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
        agent = Agent(obs_dim, num_actions, args.bf16 == "on", columns=columns).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
        model = ExternalModel(
            obs_dim,
            num_actions,
            target=args.model_target,
            hidden_sizes=args.model_hidden_sizes,
            dropout=args.model_dropout,
            gaussian=args.model_gaussian,
            nll_beta=args.model_nll_beta,
            faithful=args.model_faithful,
            columns=columns,
        ).to(device)
        model_optimizer = optim.Adam(model.parameters(), lr=args.model_learning_rate, fused=True)
        lagged = SnapshotModel(model, args.progress_lag) if args.progress_lag else LaggedModel(model, args.progress_tau)
        if args.model_data == "uniform":  # the replay file's buffer and training, drawn uniformly
            replay = ReplayBuffer(args.replay_size, obs_dim, obs_dim if args.model_target == "forward" else 1, device)
        else:
            replay = None
        model_updates = args.model_epochs * -(-args.batch_size // args.model_batch_size)
        noise_generator = torch.Generator(device).manual_seed(args.seed)  # --interest noise draws from it alone
        # logging's own draws: training ignores --eval-every
        eval_generator = torch.Generator(device).manual_seed(args.seed + 1)

        # what a checkpoint saves by state dict (the loop's values: loop_state, below)
        stateful = dict(
            agent=agent,
            optimizer=optimizer,
            model=model,
            model_optimizer=model_optimizer,
            noise_generator=noise_generator,
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
        int_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        target_size = obs_dim if args.model_target == "forward" else 1
        targets = torch.zeros((args.num_steps, args.num_envs, target_size)).to(device)
        next_views = torch.zeros_like(obs)  # each step's true next observation, for poi/by_action/* alone

        # TRY NOT TO MODIFY: start the game, or go on from the checkpoint
        iteration = 0
        global_step = 0
        phase = 0
        next_obs, infos = envs.reset(seed=args.seed)
        next_obs = torch.tensor(next_obs, device=device)
        next_info = torch.tensor(infos[info_keys[0]], device=device) if info_keys else None
        int_reward_scale = IntrinsicRewardScale(
            args.num_envs, args.int_gamma, args.int_scale_decay, device, args.int_scale
        )
        recent_returns = deque(maxlen=100)  # the task's episodic returns, for --int-after-return
        interest_on = args.int_after_return == 0 or args.no_task_reward

        if checkpoint:  # last: building the networks drew from the random states it restores
            state = restore_checkpoint(checkpoint, stateful, device)
            set_env_state(envs, state.pop("envs"))
            iteration, global_step, phase = state["iteration"], state["global_step"], state["phase"]
            next_obs, next_info = state["next_obs"], state["next_info"]
            int_reward_scale, recent_returns = state["int_reward_scale"], state["recent_returns"]
            interest_on, lagged, replay = state["interest_on"], state["lagged"], state.get("replay")
        heldout = heldout_eval.load(phase)

        def loop_state():
            """What the loop carries from one iteration to the next, as a checkpoint saves it."""
            return dict(
                iteration=iteration,
                global_step=global_step,
                phase=phase,
                next_obs=next_obs,
                next_info=next_info,
                int_reward_scale=int_reward_scale,
                recent_returns=recent_returns,
                interest_on=interest_on,
                lagged=lagged,
                replay=replay,
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
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                if phase < len(args.change_steps) and global_step > args.change_steps[phase]:
                    phase += 1  # applies at each env's next reset
                    envs.call("set_correct_key_color", phase_colors[phase])
                    heldout = heldout_eval.load(phase)
                obs[step] = next_obs

                # ALGO LOGIC: action logic
                with torch.no_grad():
                    action, logprob, _, value, int_value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                    int_values[step] = int_value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs_np, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
                done = np.logical_or(termination, truncation)
                real_next_obs = torch.tensor(true_next_obs(next_obs_np, infos, done), device=device)
                next_views[step] = real_next_obs
                if truncation.any():  # a truncated episode bootstraps from its final observation
                    with torch.no_grad():
                        final_values[step, truncation] = agent.get_value(real_next_obs[truncation])[0].flatten()
                rewards[step] = torch.tensor(reward, device=device).view(-1)
                if args.no_task_reward or global_step < args.reward_warmstart:
                    rewards[step] = 0.0
                terminations[step] = torch.tensor(termination, device=device, dtype=torch.float32)
                dones[step] = torch.tensor(done, device=device, dtype=torch.float32)
                targets[step] = model_targets(args.model_target, obs[step], real_next_obs, next_info)
                next_obs = torch.tensor(next_obs_np, device=device)
                next_info = torch.tensor(infos[info_keys[0]], device=device) if info_keys else None

                if "final_info" in infos and "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.flatnonzero(infos["final_info"]["_episode"]):
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
                        iteration_returns.append(float(episode["r"][i]))
                        recent_returns.append(float(episode["r"][i]))

            # POI LOGIC: the intrinsic advantage counts once the task is done well enough, and from then on
            full = len(recent_returns) == recent_returns.maxlen
            interest_on = interest_on or full and float(np.mean(recent_returns)) >= args.int_after_return
            int_weight = args.int_coef if interest_on else 0.0

            # EXTERNAL MODEL LOGIC: train on this rollout's transitions (or from the buffer), evaluate on the held-out set
            b_model_data = obs.reshape(-1, obs_dim), actions.reshape(-1), targets.reshape(-1, targets.shape[-1])
            before_update = args.interest in ("error", "excess")  # the interest of what the model has not yet seen
            loss_before = interest_values(args.interest, model, lagged, *b_model_data) if before_update else None
            if replay is None:
                model_train_loss = train_external_model(
                    model, model_optimizer, *b_model_data, args.model_epochs, args.model_batch_size
                )
            else:
                replay.add(*b_model_data)
                model_train_loss = train_from_replay(
                    model, model_optimizer, replay, model_updates, args.model_batch_size, 0.0, 0.0, prioritised=False
                )
            writer.add_scalar("external_model/train_loss", model_train_loss, global_step)
            if iteration % args.eval_every == 0 or iteration == args.num_iterations:
                heldout_eval.log(writer, global_step, obs, actions)
                eval_poi = interest_values(args.interest, model, lagged, **heldout, generator=eval_generator)
                writer.add_scalar("poi/eval_mean", eval_poi.mean().item(), global_step)

            # POI LOGIC: interest of every stored transition from its observed target, as a normalised reward
            poi = interest_values(
                args.interest, model, lagged, *b_model_data, loss_before=loss_before, generator=noise_generator
            )
            poi = poi.reshape(args.num_steps, args.num_envs)
            lagged.update(model)  # after the interest: progress compares the model with its past
            int_rewards = poi / (int_reward_scale.update(poi) + 1e-8)

            # bootstrap value if not done
            with torch.no_grad():
                next_value, next_int_value = (v.reshape(1, -1) for v in agent.get_value(next_obs))
                advantages, returns = compute_gae(
                    rewards, values, next_value, final_values, terminations, dones, args.gamma, args.gae_lambda
                )
                int_advantages, int_returns = intrinsic_advantages(
                    int_rewards, int_values, next_int_value, args.int_gamma, args.gae_lambda
                )

            # flatten the batch
            b_obs = obs.reshape((-1, obs_dim))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_int_advantages = int_advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_int_returns = int_returns.reshape(-1)

            # without a task reward (--no-task-reward, the warm start) the task advantage is critic noise: weight 0
            ext_weight = 0.0 if args.no_task_reward or global_step < args.reward_warmstart else args.ext_coef
            # the weights as shares of one (Adam undoes a loss's scale, not the ratio of its terms): the mix's std is 1
            # where the two agree, less where not (0.75 if uncorrelated at 2 : 1); with the other weight 0 it is PPO's
            weight_sum = ext_weight + int_weight
            ext_share, int_share = (ext_weight / weight_sum, int_weight / weight_sum) if weight_sum else (0.0, 0.0)

            # Optimizing the policy and value network
            b_inds = np.arange(args.batch_size)
            clipfracs = []
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, args.batch_size, args.minibatch_size):
                    end = start + args.minibatch_size
                    mb_inds = b_inds[start:end]

                    _, newlogprob, entropy, newvalue, new_int_value = agent.get_action_and_value(
                        b_obs[mb_inds], b_actions[mb_inds]
                    )
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # calculate approx_kl http://joschu.net/blog/kl-approx.html
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                    mb_advantages, mb_int_advantages = b_advantages[mb_inds], b_int_advantages[mb_inds]
                    if args.norm_adv:  # each on its own: the weights weigh them, whatever their scales
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                        mb_int_advantages = (mb_int_advantages - mb_int_advantages.mean()) / (
                            mb_int_advantages.std() + 1e-8
                        )
                    mb_advantages = ext_share * mb_advantages + int_share * mb_int_advantages

                    pg_loss, v_loss = clipped_losses(
                        ratio, mb_advantages, newvalue.view(-1), b_values[mb_inds], b_returns[mb_inds], args
                    )
                    int_v_loss = 0.5 * ((new_int_value.view(-1) - b_int_returns[mb_inds]) ** 2).mean()

                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                    loss = loss + int_v_loss * args.vf_coef

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
            writer.add_scalar("losses/int_value_loss", int_v_loss.item(), global_step)
            writer.add_scalar("poi/mean", poi.mean().item(), global_step)
            writer.add_scalar("poi/max", poi.max().item(), global_step)
            writer.add_scalar("poi/intrinsic_reward_mean", int_rewards.mean().item(), global_step)
            writer.add_scalar("poi/int_weight", int_weight, global_step)
            log_interest_by_action(writer, global_step, poi, obs, actions, next_views)
            mean_return = np.mean(iteration_returns) if iteration_returns else float("nan")
            say(progress_line(global_step, args.total_timesteps, sps, mean_return, model_train_loss))
            run.end_iteration(iteration, global_step, stateful, loop_state)  # the checkpoint when due; a stop if asked

        if args.save_model:
            meta = dict(env=args.env, observation="one_hot_view", noise="gumbel", noise_size=num_actions)
            meta["correct_key_color"] = phase_colors[-1] if phase_colors else None
            run.save_models(agent, obs_dim, meta, agent=agent, external_model=model)
