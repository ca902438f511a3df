# docs: docs/algorithms/sac_forward_model.md
import math
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# `python algos/sac_forward_model.py` finds envs/ and common/
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

from common.checkpoint import env_state, restore_checkpoint, set_env_state
from common.console import say
from common.heldout import continuous_heldout_tensors
from common.runs import Run, RunArgs, check_finite, parse_args, progress_line
from envs import true_next_obs
from envs.continuous import (
    FlatGoalObs,
    changed_region_share,
    check_continuous_env,
    fill_in_phases,
    inner_wrapper,
    make_continuous_env,
    motor_change,
)


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
    checkpoint_every: int = 10000
    """write checkpoint.pt (with the replay buffer and the forward model's data) every this many steps, a multiple of 1000 (the logging interval), and on Ctrl-C or SIGTERM; 0: never"""

    # environment arguments
    env: str = "Pendulum-v1"
    """a gymnasium id with continuous actions (Pendulum-v1, HalfCheetah-v5, Walker2d-v5, FetchReach-v4, ...)"""
    change_steps: tuple[int, ...] | None = None
    """global steps at which the world changes, on an env that changes (PendulumMotorChange-v1; default: once, at
    half of --total-timesteps)"""

    # SAC arguments
    total_timesteps: int = 1_000_000
    """total timesteps of the experiments"""
    buffer_size: int = 1_000_000
    """the replay memory buffer size"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 0.005
    """target smoothing coefficient"""
    batch_size: int = 256
    """the batch size of sample from the replay memory"""
    learning_starts: int = 5_000
    """timestep to start learning (random actions before it)"""
    policy_lr: float = 3e-4
    """the learning rate of the policy network optimizer"""
    q_lr: float = 1e-3
    """the learning rate of the Q network optimizer"""
    policy_frequency: int = 2
    """the frequency of training policy (delayed)"""
    target_network_frequency: int = 1
    """the frequency of updates for the target networks"""
    alpha: float = 0.2
    """entropy regularization coefficient (the start value when autotuned)"""
    autotune: bool = True
    """automatic tuning of the entropy coefficient"""
    her: bool = True
    """on a goal-conditioned env (a dict observation: FetchReach-v4, ...), relabel sampled transitions with goals
    achieved later in their episode (hindsight experience replay, `future`), as Scilab-RL's SAC config does; no
    effect elsewhere"""
    her_k: int = 4
    """HER's relabelled transitions per real one: a sampled transition is relabelled with probability k / (k + 1)"""

    # POI arguments
    int_coef: float = 0.0
    """weight of the intrinsic reward added to each sampled transition's reward: its interest over the batch's mean
    interest (0: SAC, the forward model only watches)"""
    interest: Literal["error", "noise"] = "error"
    """error: the forward model's squared error on the transition, under the model of the time; noise: a uniform
    draw fixed when the transition is stored, independent of everything else (a control)"""

    # forward model arguments
    fm_gaussian: bool = False
    """if toggled, the forward model predicts a mean and a clamped log-std and is trained by Gaussian NLL (else MSE)"""
    fm_hidden_size: int = 256
    """width of the forward model's hidden layers"""
    fm_layers: int = 2
    """number of hidden layers of the forward model"""
    fm_activation: Literal["relu", "tanh", "logistic"] = "relu"
    """activation of the forward model's hidden layers"""
    fm_retrain_every: int = 1000
    """retrain the forward model on the data collected so far every this many steps"""
    fm_window: int | None = None
    """if set, retrain and evaluate on the last this many transitions only (a world that changes: the data from
    before a change leaves the model's training after this many steps); unset: on all of them"""
    fm_epochs: int = 1
    """passes over the training data at each retraining"""
    fm_batch_size: int = 256
    """the mini-batch size of the forward model's training"""
    fm_learning_rate: float = 1e-3
    """the learning rate of the forward model's Adam optimizer"""
    fm_eval_fraction: float = 0.2
    """share of the transitions held out (never trained on) for `fm/eval_loss`"""

    # evaluation arguments
    eval_steps: int = 10_240
    """random-policy transitions in each phase's held-out set (`external_model/eval_loss`)"""
    eval_episode_steps: int = 80
    """steps of each random-policy world of the held-out set"""


# what each flag may take, checked before the run starts (common/checks.py): "positive" (an integer, or each of a
# tuple's), or an interval with open "(" or closed "[" ends; an optional flag left at None passes
RANGES = {
    "positive": (
        "total_timesteps buffer_size batch_size policy_frequency target_network_frequency fm_hidden_size "
        "fm_layers fm_retrain_every fm_window fm_epochs fm_batch_size torch_threads eval_steps eval_episode_steps "
        "her_k"
    ),
    "(0, inf)": "policy_lr q_lr fm_learning_rate",
    "[0, 4294967295]": "seed",  # numpy seeds its generator with 32 bits
    "[0, inf)": "checkpoint_every alpha int_coef",
    "(0, 1]": "gamma tau",
    "(0, 1)": "fm_eval_fraction",
}


def fill_in_defaults(args: Args) -> None:
    """Fill in the change steps; raise ValueError (one line) for what cannot run."""
    if not 0 <= args.learning_starts < args.total_timesteps:
        raise ValueError(
            f"--learning-starts must be in [0, total-timesteps={args.total_timesteps}), got {args.learning_starts}"
        )
    if args.checkpoint_every % 1000:
        raise ValueError(
            f"--checkpoint-every must be a multiple of 1000 (SAC logs every 1000 steps), got {args.checkpoint_every}"
        )
    check_continuous_env(args.env)
    fill_in_phases(args)


def make_env(env_id, seed, capture_video, run_dir):
    def thunk():
        if capture_video:
            env = make_continuous_env(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"{run_dir}/videos")
        else:
            env = make_continuous_env(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env.action_space.seed(seed)
        return env

    return thunk


class SoftQNetwork(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim + action_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, x, a):
        x = torch.cat([x, a], 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


LOG_STD_MAX = 2
LOG_STD_MIN = -5


class Actor(nn.Module):
    def __init__(self, obs_dim, action_space):
        super().__init__()
        action_dim = int(np.prod(action_space.shape))
        self.fc1 = nn.Linear(obs_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mean = nn.Linear(256, action_dim)
        self.fc_logstd = nn.Linear(256, action_dim)
        # action rescaling
        self.register_buffer(
            "action_scale", torch.tensor((action_space.high - action_space.low) / 2.0, dtype=torch.float32)
        )
        self.register_buffer(
            "action_bias", torch.tensor((action_space.high + action_space.low) / 2.0, dtype=torch.float32)
        )

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        mean = self.fc_mean(x)
        log_std = torch.tanh(self.fc_logstd(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)  # From SpinUp / Denis Yarats
        return mean, log_std

    def act(self, x, noise):
        """The action for `x` under standard normal `noise` (zeros: the squashed mean); --save-model exports it."""
        mean, log_std = self(x)
        return torch.tanh(mean + log_std.exp() * noise) * self.action_scale + self.action_bias

    def get_action(self, x):
        mean, log_std = self(x)
        std = log_std.exp()
        x_t = mean + torch.randn_like(mean) * std  # the reparameterisation trick
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        # the normal's log density, as torch.distributions.Normal computes it (without its argument checks)
        log_prob = -((x_t - mean) ** 2) / (2 * std**2) - std.log() - math.log(math.sqrt(2 * math.pi))
        # Enforcing Action Bound
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


class ReplayBuffer:
    """A ring buffer of one env's transitions, in the order they came; `next_obs` is the true next observation (never
    a reset one). With `goal_dim`, the observations end with the desired goal, and each transition keeps the goal its
    next observation achieved and where its episode ends, for hindsight relabelling (`sample`'s `her`). Each
    transition also keeps a uniform draw from a generator of the buffer's own, seeded by (`seed`, 1) (the noise
    interest): a stream apart from the forward model's split and from the env's first states and the random actions
    (those two are seeded alike by `seed`: their generators start in one state). And the phase of the world it came from
    (`world`: MotorChange's, 0 on a world that does not change), which only the logs read."""

    NOT_ENDED = np.iinfo(np.int64).max

    def __init__(self, capacity, obs_dim, action_dim, goal_dim=0, seed=0):
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminations = np.zeros(capacity, dtype=np.float32)
        self.noise, self.noise_rng = np.zeros(capacity, dtype=np.float32), np.random.default_rng((seed, 1))
        self.world = np.zeros(capacity, dtype=np.int64)
        self.capacity, self.pos, self.full = capacity, 0, False
        # for HER: the achieved goal of each next observation; each transition's number (counting every one added)
        # and the number past its episode's last (NOT_ENDED while it goes on)
        self.goal_dim, self.count, self.episode_start = goal_dim, 0, 0
        self.next_achieved = np.zeros((capacity, goal_dim), dtype=np.float32)
        self.number = np.zeros(capacity, dtype=np.int64)
        self.episode_end = np.zeros(capacity, dtype=np.int64)

    def add(self, obs, next_obs, action, reward, termination, next_achieved=None, done=None, world=0):
        n = len(obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx], self.next_obs[idx], self.actions[idx] = obs, next_obs, action
        self.rewards[idx], self.terminations[idx] = reward, termination
        self.noise[idx] = self.noise_rng.random(n, dtype=np.float32)
        self.world[idx] = world
        self.full = self.full or self.pos + n >= self.capacity
        self.pos = (self.pos + n) % self.capacity
        if self.goal_dim:
            self.next_achieved[idx] = next_achieved
            self.number[idx], self.episode_end[idx] = self.count + np.arange(n), self.NOT_ENDED
            for i in np.flatnonzero(done):  # the episode ends with its row i: mark its rows still in the buffer
                end = self.count + i + 1
                rows = np.arange(max(self.episode_start, end - self.capacity), end) % self.capacity
                self.episode_end[rows] = end
                self.episode_start = end
        self.count += n

    def sample(self, batch_size, device, her=None):
        """`batch_size` transitions drawn uniformly. With `her` = (k, compute_reward), each is relabelled with
        probability k / (k + 1): its desired goal becomes the goal achieved at a step drawn uniformly from its own
        to the last of its episode so far, and its reward compute_reward(its achieved goal, that goal, None) (the
        termination stays: the Fetch tasks never terminate). Last, the world of each (a numpy array: for the logs)."""
        idx = np.random.randint(self.capacity if self.full else self.pos, size=batch_size)
        obs, next_obs, rewards = self.obs[idx], self.next_obs[idx], self.rewards[idx]  # copies
        if her is not None:
            k, compute_reward = her
            relabel = np.flatnonzero(np.random.random(batch_size) < k / (k + 1))
            first, end = self.number[idx[relabel]], np.minimum(self.episode_end[idx[relabel]], self.count)
            future = first + (np.random.random(len(relabel)) * (end - first)).astype(np.int64)
            goals = self.next_achieved[future % self.capacity]
            obs[relabel, -self.goal_dim :] = goals
            next_obs[relabel, -self.goal_dim :] = goals
            rewards[relabel] = compute_reward(self.next_achieved[idx[relabel]], goals, None)
        as_tensor = lambda x: torch.tensor(x, device=device)  # noqa: E731
        return (
            as_tensor(obs),
            as_tensor(self.actions[idx]),
            as_tensor(next_obs),
            as_tensor(rewards),
            as_tensor(self.terminations[idx]),
            as_tensor(self.noise[idx]),
            self.world[idx],
        )


def worlds(envs) -> np.ndarray:
    """Each env's world: the phase its MotorChange acts in (0 for a world that does not change)."""
    return np.array([motor.phase if (motor := motor_change(env)) else 0 for env in envs.envs])


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "logistic": nn.Sigmoid}


class ForwardModel(nn.Module):
    """Learns `next_obs - obs` from (obs, action); `predict` returns `obs + delta`.
    Deterministic (MSE) or Gaussian (mean and clamped log-std heads, plain NLL)."""

    LOG_STD_MIN, LOG_STD_MAX = -10.0, 2.0

    def __init__(self, obs_dim, action_dim, hidden_size=256, layers=2, activation="relu", gaussian=False):
        super().__init__()
        self.config = dict(
            obs_dim=obs_dim,
            action_dim=action_dim,
            hidden_size=hidden_size,
            layers=layers,
            activation=activation,
            gaussian=gaussian,
        )
        body, in_dim = [], obs_dim + action_dim
        for _ in range(layers):
            body += [nn.Linear(in_dim, hidden_size), ACTIVATIONS[activation]()]
            in_dim = hidden_size
        self.body = nn.Sequential(*body)
        self.mean = nn.Linear(in_dim, obs_dim)
        self.log_std = nn.Linear(in_dim, obs_dim) if gaussian else None

    def forward(self, obs, actions):
        """Mean and log-std (None when deterministic) of `next_obs - obs`."""
        h = self.body(torch.cat([obs, actions], dim=-1))
        if self.log_std is None:
            return self.mean(h), None
        return self.mean(h), self.log_std(h).clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)

    def per_sample_loss(self, obs, actions, deltas):
        """MSE, or Gaussian NLL without its constant, averaged over observation dimensions."""
        mean, log_std = self(obs, actions)
        if log_std is None:
            return ((mean - deltas) ** 2).mean(-1)
        return (0.5 * ((deltas - mean) / log_std.exp()) ** 2 + log_std).mean(-1)

    @torch.no_grad()
    def predict(self, obs, actions):
        """The predicted next observation (the mean for a Gaussian model)."""
        return obs + self(obs, actions)[0]

    def save(self, path):
        torch.save({"config": self.config, "state_dict": self.state_dict()}, path)

    @classmethod
    def load(cls, path, map_location="cpu"):
        checkpoint = torch.load(path, map_location=map_location)
        model = cls(**checkpoint["config"])
        model.load_state_dict(checkpoint["state_dict"])
        return model.eval()


class TransitionSet:
    """Every transition the agent saw, each assigned once to the training or the held-out part."""

    def __init__(self, capacity, obs_dim, action_dim, eval_fraction, seed):
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.deltas = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.held_out = np.zeros(capacity, dtype=bool)
        self.size, self.eval_fraction = 0, eval_fraction
        self.rng = np.random.default_rng(seed)

    def add(self, obs, action, next_obs):
        n = len(obs)
        rows = slice(self.size, self.size + n)
        self.obs[rows], self.actions[rows], self.deltas[rows] = obs, action, next_obs - obs
        self.held_out[rows] = self.rng.random(n) < self.eval_fraction
        self.size += n

    def part(self, held_out, device, window=None):
        """The training (held_out False) or held-out transitions among the last `window` added (None: all)."""
        start = 0 if window is None else max(0, self.size - window)
        rows = start + np.flatnonzero(self.held_out[start : self.size] == held_out)
        return tuple(torch.tensor(x[rows], device=device) for x in (self.obs, self.actions, self.deltas))


@torch.no_grad()
def heldout_error(model, obs, actions, next_obs):
    """The squared error of the model's mean prediction on held-out transitions (MSE and Gaussian models alike)."""
    model.eval()
    return ((model(obs, actions)[0] - (next_obs - obs)) ** 2).mean().item()


@torch.no_grad()
def transition_errors(model, obs, actions, next_obs):
    """Each transition's squared error of the model's mean prediction, averaged over observation dimensions."""
    return ((model(obs, actions)[0] - (next_obs - obs)) ** 2).mean(-1)


@torch.no_grad()
def soft_update(targets, params, tau):
    """Each target tensor <- tau * its parameter + (1 - tau) * itself, in three foreach calls (a Python loop
    over the tensors costs more than the arithmetic); bitwise the loop's in float32, float64 and bfloat16."""
    torch._foreach_mul_(targets, 1 - tau)
    torch._foreach_add_(targets, torch._foreach_mul(params, tau))


def retrain_due(global_step, every):
    """Whether the forward model is retrained after step `global_step` (1-based)."""
    return global_step % every == 0


def train_forward_model(model, optimizer, obs, actions, deltas, epochs, batch_size):
    """Mini-batch passes over all training transitions; returns the mean training loss."""
    model.train()
    losses = []
    for _ in range(epochs):
        for idx in torch.randperm(len(obs)).split(batch_size):
            loss = model.per_sample_loss(obs[idx], actions[idx], deltas[idx]).mean()
            optimizer.zero_grad()
            check_finite("forward model's loss", loss)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return float(np.mean(losses))


@torch.no_grad()
def eval_forward_model(model, obs, actions, deltas, chunk=65_536):
    model.eval()
    losses = [
        model.per_sample_loss(*(x[i : i + chunk] for x in (obs, actions, deltas))) for i in range(0, len(obs), chunk)
    ]
    return torch.cat(losses).mean().item()


if __name__ == "__main__":
    args, checkpoint = parse_args(Args, RANGES, fill_in_defaults)
    with Run(args, checkpoint) as run:  # the run folder, its writer, checkpoints and ending: common/runs.py
        writer = run.writer

        # TRY NOT TO MODIFY: seeding
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        torch.set_num_threads(args.torch_threads)
        torch.backends.cudnn.deterministic = args.torch_deterministic
        device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

        # env setup: SAME_STEP autoreset gives the true final observation in infos["final_obs"]
        envs = gym.vector.SyncVectorEnv(
            [make_env(args.env, args.seed, args.capture_video, run.dir)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
        run.callback(envs.close)
        assert isinstance(envs.single_action_space, gym.spaces.Box), "only continuous action space is supported"
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        action_dim = int(np.prod(envs.single_action_space.shape))

        actor = Actor(obs_dim, envs.single_action_space).to(device)
        qf1 = SoftQNetwork(obs_dim, action_dim).to(device)
        qf2 = SoftQNetwork(obs_dim, action_dim).to(device)
        qf1_target = SoftQNetwork(obs_dim, action_dim).to(device)
        qf2_target = SoftQNetwork(obs_dim, action_dim).to(device)
        qf1_target.load_state_dict(qf1.state_dict())
        qf2_target.load_state_dict(qf2.state_dict())
        q_params = [*qf1.parameters(), *qf2.parameters()]
        q_target_params = [*qf1_target.parameters(), *qf2_target.parameters()]
        q_optimizer = optim.Adam(q_params, lr=args.q_lr, fused=True)
        actor_optimizer = optim.Adam(list(actor.parameters()), lr=args.policy_lr, fused=True)

        # Automatic entropy tuning
        if args.autotune:
            target_entropy = -float(action_dim)
            log_alpha = torch.tensor(np.log(args.alpha), dtype=torch.float32, device=device, requires_grad=True)
            alpha = log_alpha.exp().item()
            a_optimizer = optim.Adam([log_alpha], lr=args.q_lr, fused=True)
        else:
            alpha = args.alpha

        goals = inner_wrapper(envs.envs[0], FlatGoalObs)  # a goal-conditioned env: HER's relabelling (--her)
        goal_dim = goals.goal_dim if goals and args.her else 0
        rb = ReplayBuffer(min(args.buffer_size, args.total_timesteps), obs_dim, action_dim, goal_dim, args.seed)
        fm = ForwardModel(
            obs_dim, action_dim, args.fm_hidden_size, args.fm_layers, args.fm_activation, args.fm_gaussian
        )
        fm = fm.to(device)
        fm_optimizer = optim.Adam(fm.parameters(), lr=args.fm_learning_rate, fused=True)
        # its split from a stream of its own: `seed` alone draws the env's first states and the random actions
        transitions = TransitionSet(args.total_timesteps, obs_dim, action_dim, args.fm_eval_fraction, (args.seed, 2))
        fm_train_loss = float("nan")

        # what a checkpoint saves by state dict (the loop's values: loop_state, below)
        stateful = dict(
            actor=actor,
            qf1=qf1,
            qf2=qf2,
            qf1_target=qf1_target,
            qf2_target=qf2_target,
            q_optimizer=q_optimizer,
            actor_optimizer=actor_optimizer,
            fm=fm,
            fm_optimizer=fm_optimizer,
        )
        if args.autotune:
            stateful["a_optimizer"] = a_optimizer

        # TRY NOT TO MODIFY: start the game, or go on from the checkpoint
        global_step, phase = 0, 0
        obs, _ = envs.reset(seed=args.seed)
        episode_returns = []
        if checkpoint:  # last: building the networks drew from the random states it restores
            state = restore_checkpoint(checkpoint, stateful, device)
            set_env_state(envs, state.pop("envs"))
            global_step, obs, episode_returns = state["global_step"], state["obs"], state["episode_returns"]
            phase = state["phase"]
            fm_train_loss, rb, transitions = state["fm_train_loss"], state["rb"], state["transitions"]
            if args.autotune:
                log_alpha.data.copy_(state["log_alpha"])
                alpha = log_alpha.exp().item()

        def loop_state():
            """What the loop carries from one iteration to the next, as a checkpoint saves it."""
            return dict(
                global_step=global_step,
                obs=obs,
                episode_returns=episode_returns,
                fm_train_loss=fm_train_loss,
                rb=rb,
                transitions=transitions,
                log_alpha=log_alpha.detach() if args.autotune else None,
                phase=phase,
                envs=env_state(envs),
            )

        # every phase's own held-out set: random-policy transitions
        heldout = continuous_heldout_tensors(args.env, phase, args.eval_steps, args.eval_episode_steps, device)
        her = (args.her_k, envs.envs[0].unwrapped.compute_reward) if goal_dim else None

        run.start_loop(global_step)  # the clock starts; a stop now waits for the iteration's checkpoint
        for global_step in range(global_step + 1, args.total_timesteps + 1):
            if phase < len(args.change_steps) and global_step > args.change_steps[phase]:
                phase += 1  # applies at the env's next reset
                envs.call("set_phase", phase)
                heldout = continuous_heldout_tensors(args.env, phase, args.eval_steps, args.eval_episode_steps, device)

            # ALGO LOGIC: put action logic here
            if global_step <= args.learning_starts:
                actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
            else:
                with torch.no_grad():
                    actions, _, _ = actor.get_action(torch.tensor(obs, dtype=torch.float32, device=device))
                actions = actions.cpu().numpy()

            # TRY NOT TO MODIFY: execute the game and log data.
            world = worlds(envs)  # each env's world during this step, for the logs
            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
            done = np.logical_or(terminations, truncations)
            if "final_info" in infos and "episode" in infos["final_info"]:
                episode = infos["final_info"]["episode"]
                for i in np.flatnonzero(infos["final_info"]["_episode"]):
                    writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                    writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
                    episode_returns.append(float(episode["r"][i]))
                    if "is_success" in infos["final_info"]:  # a goal-conditioned task: whether its last step reached it
                        writer.add_scalar("charts/episodic_success", infos["final_info"]["is_success"][i], global_step)

            # every transition goes to the replay buffer and to the forward model's data (the real ones only: HER
            # relabels the replay buffer's samples)
            real_next_obs = true_next_obs(next_obs, infos, done)
            next_achieved = None
            if goal_dim:  # the goal each true next observation achieved
                next_achieved = infos["achieved_goal"].copy()
                for i in np.flatnonzero(done):
                    next_achieved[i] = infos["final_info"]["achieved_goal"][i]
            rb.add(obs, real_next_obs, actions, rewards, terminations, next_achieved, done, world)
            transitions.add(obs, actions, real_next_obs)
            obs = next_obs

            # ALGO LOGIC: training.
            if global_step > args.learning_starts:
                b_obs, b_actions, b_next_obs, b_rewards, b_terminations, b_noise, b_world = rb.sample(
                    args.batch_size, device, her
                )
                if args.int_coef:  # POI LOGIC: each transition's interest, over the batch's mean, as a reward
                    poi = b_noise if args.interest == "noise" else transition_errors(fm, b_obs, b_actions, b_next_obs)
                    int_rewards = poi / (poi.mean() + 1e-12)
                    b_rewards = b_rewards + args.int_coef * int_rewards
                with torch.no_grad():
                    next_state_actions, next_state_log_pi, _ = actor.get_action(b_next_obs)
                    qf1_next_target = qf1_target(b_next_obs, next_state_actions)
                    qf2_next_target = qf2_target(b_next_obs, next_state_actions)
                    min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha * next_state_log_pi
                    next_q_value = b_rewards + (1 - b_terminations) * args.gamma * min_qf_next_target.view(-1)

                qf1_a_values = qf1(b_obs, b_actions).view(-1)
                qf2_a_values = qf2(b_obs, b_actions).view(-1)
                qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
                qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
                qf_loss = qf1_loss + qf2_loss

                # optimize the model
                q_optimizer.zero_grad()
                check_finite("Q-networks' loss", qf_loss)
                qf_loss.backward()
                q_optimizer.step()

                if global_step % args.policy_frequency == 0:  # TD 3 Delayed update support
                    # compensate for the delay by doing `policy_frequency` updates instead of 1
                    for _ in range(args.policy_frequency):
                        pi, log_pi, _ = actor.get_action(b_obs)
                        qf1.requires_grad_(False), qf2.requires_grad_(False)  # no gradient of the critics' weights
                        qf1_pi = qf1(b_obs, pi)
                        qf2_pi = qf2(b_obs, pi)
                        qf1.requires_grad_(True), qf2.requires_grad_(True)
                        min_qf_pi = torch.min(qf1_pi, qf2_pi)
                        actor_loss = ((alpha * log_pi) - min_qf_pi).mean()

                        actor_optimizer.zero_grad()
                        check_finite("actor's loss", actor_loss)
                        actor_loss.backward()
                        actor_optimizer.step()

                        if args.autotune:
                            with torch.no_grad():
                                _, log_pi, _ = actor.get_action(b_obs)
                            alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()

                            a_optimizer.zero_grad()
                            check_finite("entropy temperature's loss", alpha_loss)
                            alpha_loss.backward()
                            a_optimizer.step()
                            alpha = log_alpha.exp().item()

                # update the target networks
                if global_step % args.target_network_frequency == 0:
                    soft_update(q_target_params, q_params, args.tau)

            # FORWARD MODEL LOGIC: retrain on the transitions so far (the last --fm-window), evaluate on the held-out
            if retrain_due(global_step, args.fm_retrain_every):
                train_part = transitions.part(False, device, args.fm_window)
                eval_part = transitions.part(True, device, args.fm_window)
                if len(train_part[0]) and len(eval_part[0]):
                    fm_train_loss = train_forward_model(
                        fm, fm_optimizer, *train_part, args.fm_epochs, args.fm_batch_size
                    )
                    writer.add_scalar("external_model/train_loss", fm_train_loss, global_step)
                    writer.add_scalar("fm/eval_loss", eval_forward_model(fm, *eval_part), global_step)
                    for suffix, data in zip(("", "_changed"), heldout):
                        if data is not None:
                            writer.add_scalar(
                                f"external_model/eval_loss{suffix}", heldout_error(fm, *data), global_step
                            )

            if global_step % 1000 == 0 or global_step == args.total_timesteps:
                sps = run.sps(global_step)
                if global_step > args.learning_starts:
                    writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                    writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                    writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                    writer.add_scalar("losses/alpha", alpha, global_step)
                    if args.autotune and global_step > args.learning_starts + args.policy_frequency:
                        writer.add_scalar("losses/alpha_loss", alpha_loss.item(), global_step)
                    if global_step >= args.learning_starts + args.policy_frequency:
                        writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                    if args.int_coef:  # the last batch's
                        writer.add_scalar("poi/mean", poi.mean().item(), global_step)
                        writer.add_scalar("poi/max", poi.max().item(), global_step)
                        writer.add_scalar("poi/intrinsic_reward_max", int_rewards.max().item(), global_step)
                        if motor_change(envs.envs[0]):  # the batch's rows from an earlier world, and their interest
                            old = torch.tensor(b_world < worlds(envs).max(), device=device)
                            writer.add_scalar("poi/old_world_rows", old.float().mean().item(), global_step)
                            old_share = (int_rewards[old].sum() / int_rewards.sum()).item()
                            writer.add_scalar("poi/old_world_interest", old_share, global_step)
                writer.add_scalar("charts/SPS", int(sps), global_step)
                writer.add_scalar("charts/phase", phase, global_step)
                share = changed_region_share(
                    envs
                )  # where the agent went since the last log: the region the change acts on
                if share is not None:
                    writer.add_scalar("external_model/rollout_changed_share", share, global_step)
                mean_return = np.mean(episode_returns) if episode_returns else float("nan")
                say(progress_line(global_step, args.total_timesteps, sps, mean_return, fm_train_loss))
                episode_returns = []
                # the checkpoint when due; a stop if asked
                run.end_iteration(global_step, global_step, stateful, loop_state)

        if args.save_model:
            meta = dict(env=args.env, observation="raw", noise="normal", noise_size=action_dim)
            run.save_models(actor, obs_dim, meta, actor=actor, forward_model=fm)
