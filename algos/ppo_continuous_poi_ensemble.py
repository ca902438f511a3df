# docs: docs/algorithms/ppo_continuous_poi_ensemble.md
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python algos/<file>.py` finds envs/ and common/

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.normal import Normal

from common.checkpoint import env_state, restore_checkpoint, set_env_state
from common.console import say
from common.heldout import continuous_heldout_tensors
from common.runs import Run, RunArgs, check_finite, parse_args, progress_line
from envs import true_next_obs
from envs.continuous import (
    changed_region_share,
    check_continuous_env,
    fill_in_phases,
    inner_wrapper,
    last_steps_in_region,
    make_continuous_env,
    share_in_region,
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

    # environment arguments
    env: str = "Pendulum-v1"
    """a gymnasium id with continuous actions (Pendulum-v1, Walker2d-v5, HalfCheetah-v5, FetchReach-v4, ...)"""
    change_steps: tuple[int, ...] | None = None
    """global steps at which the world changes, on an env that changes (PendulumMotorChange-v1; default: once, at
    half of --total-timesteps)"""

    # PPO arguments
    total_timesteps: int = 1_000_000
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    num_steps: int = 2048
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # forward model arguments
    model_hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer sizes of each member of the forward model"""
    model_learning_rate: float = 1e-3
    """the learning rate of the forward model's Adam optimizer"""
    model_epochs: int = 1
    """passes over each rollout's transitions to train the forward model"""
    model_batch_size: int = 256
    """the mini-batch size of the forward model's training"""

    # POI arguments
    interest: Literal["ensemble", "noise"] = "ensemble"
    """ensemble: the members' disagreement on each transition; noise: a uniform draw per transition, independent of
    everything else (a control: a reward that changes the agent's behaviour but carries no model signal)"""
    ensemble_size: int = 5
    """members of the forward model's ensemble, whose disagreement is the point-of-interest value"""
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

    # evaluation arguments
    eval_every: int = 1
    """log the forward model's held-out loss every this many iterations"""
    eval_steps: int = 10_240
    """random-policy transitions in each phase's held-out set (`external_model/eval_loss`)"""
    eval_episode_steps: int = 80
    """steps of each random-policy world of the held-out set"""

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
        "total_timesteps num_envs num_steps num_minibatches update_epochs model_epochs model_batch_size "
        "torch_threads model_hidden_sizes eval_every eval_steps eval_episode_steps"
    ),
    "(0, inf)": "learning_rate clip_coef max_grad_norm target_kl model_learning_rate",
    "[0, 4294967295]": "seed",  # numpy seeds its generator with 32 bits
    "[0, inf)": "checkpoint_every ent_coef vf_coef int_coef ext_coef reward_warmstart",
    "(0, 1]": "gamma int_gamma",
    "[0, 1]": "gae_lambda",
    "[0, 1)": "int_scale_decay",
    "[2, inf)": "ensemble_size",
}


def fill_in_defaults(args: Args) -> None:
    """Fill in the runtime sizes and the change steps; raise ValueError (one line) for what cannot run (an env that
    is not continuous)."""
    args.batch_size = args.num_envs * args.num_steps
    if args.batch_size % args.num_minibatches:
        raise ValueError(
            f"batch size num-envs*num-steps={args.batch_size} is not divisible by --num-minibatches={args.num_minibatches}"
        )
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations == 0:
        raise ValueError(f"--total-timesteps {args.total_timesteps} is less than one rollout ({args.batch_size} steps)")
    check_continuous_env(args.env)
    fill_in_phases(args)


def make_env(env_id, idx, capture_video, run_dir, gamma):
    def thunk():
        if capture_video and idx == 0:
            env = make_continuous_env(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"{run_dir}/videos")
        else:
            env = make_continuous_env(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
        return env

    return thunk


def observation_statistics(env):
    """The running mean and variance of `make_env`'s NormalizeObservation wrapper inside `env`."""
    while not isinstance(env, gym.wrappers.NormalizeObservation):
        env = env.env
    return env.obs_rms.mean.copy(), env.obs_rms.var.copy()


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        # intrinsic value head: reads the critic's body, never trains it
        self.critic_int = layer_init(nn.Linear(64, 1), std=1.0)
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, action_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def act(self, x, noise):
        """The action for `x` under standard normal `noise` (zeros: the mean); --save-model exports it."""
        return self.actor_mean(x) + self.actor_logstd.exp() * noise

    def task_parameters(self):
        """Every parameter but the intrinsic value head's: the actor and the task critic, ppo.py's agent."""
        return [p for name, p in self.named_parameters() if not name.startswith("critic_int.")]

    def get_value(self, x):
        hidden = self.critic[:-1](x)
        return self.critic[-1](hidden), self.critic_int(hidden.detach())

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        probs = Normal(action_mean, torch.exp(action_logstd))
        if action is None:
            action = probs.sample()
        value, int_value = self.get_value(x)
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), value, int_value


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


class ForwardModel(nn.Module):
    """An ensemble of `num_members` MLPs learning `next_obs - obs` from (obs, action), all
    members in one batched computation; `predict` returns `obs` + the members' mean delta.
    It works in the agent's (normalised) observation space."""

    def __init__(self, obs_dim, action_dim, hidden_sizes=(256, 256), num_members=5):
        super().__init__()
        self.config = dict(
            obs_dim=obs_dim, action_dim=action_dim, hidden_sizes=tuple(hidden_sizes), num_members=num_members
        )
        self.num_members = num_members
        layers, in_dim = [], obs_dim + action_dim
        for size in hidden_sizes:
            layers += [EnsembleLinear(num_members, in_dim, size), nn.ReLU()]
            in_dim = size
        self.body = nn.Sequential(*layers)
        self.mean = EnsembleLinear(num_members, in_dim, obs_dim)

    def forward(self, obs, actions):
        """Each member's predicted delta, (members, batch, obs_dim). A (batch, ...) input goes to
        every member; a (members, batch, ...) input gives each member its own batch."""
        x = torch.cat([obs, actions], dim=-1)
        return self.mean(self.body(x.expand(self.num_members, *x.shape) if x.dim() == 2 else x))

    def per_sample_loss(self, obs, actions, deltas):
        """MSE averaged over observation dimensions, (members, batch)."""
        return ((self(obs, actions) - deltas) ** 2).mean(-1)

    @torch.no_grad()
    def predict(self, obs, actions):
        return obs + self(obs, actions).mean(0)

    def save(self, path):
        torch.save({"config": self.config, "state_dict": self.state_dict()}, path)

    @classmethod
    def load(cls, path, map_location="cpu"):
        checkpoint = torch.load(path, map_location=map_location)
        model = cls(**checkpoint["config"])
        model.load_state_dict(checkpoint["state_dict"])
        return model.eval()


def train_forward_model(model, optimizer, obs, actions, deltas, epochs, batch_size):
    """Mini-batch passes over one rollout's transitions, each member in its own shuffled
    order (one batched step trains all); returns the members' mean training loss."""
    losses = []
    for _ in range(epochs):
        orders = torch.stack([torch.randperm(len(obs)) for _ in range(model.num_members)])
        for idx in orders.split(batch_size, dim=1):
            loss = model.per_sample_loss(obs[idx], actions[idx], deltas[idx]).mean()
            optimizer.zero_grad()
            check_finite("forward model's loss", loss)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return float(np.mean(losses))


@torch.no_grad()
def poi_values(model, obs, actions):
    """Ensemble disagreement: the variance of the members' predictions, averaged over
    observation dimensions; one value per (observation, action)."""
    predictions = model(obs, actions)
    return (predictions - predictions.mean(0)).pow_(2).mean((0, 2))  # torch's var(0) is ~8x slower on the CPU


@torch.no_grad()
def raw_heldout_error(model, obs, actions, next_obs, obs_mean, obs_var):
    """The squared error of the members' mean prediction on held-out transitions, in raw observation units (as
    sac_forward_model.py's, whatever the normalisation): the raw observations normalised by (`obs_mean`, `obs_var`)
    as make_env's wrappers do, the predicted next observation mapped back by the same statistics."""
    std = torch.sqrt(obs_var + 1e-8)
    normalised = ((obs - obs_mean) / std).clamp(-10, 10)
    predicted = (normalised + model(normalised, actions).mean(0)) * std + obs_mean
    return ((predicted - next_obs) ** 2).mean().item()


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
            [make_env(args.env, i, args.capture_video, run.dir, args.gamma) for i in range(args.num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
        run.callback(envs.close)
        assert isinstance(envs.single_action_space, gym.spaces.Box), "only continuous action space is supported"
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        action_dim = int(np.prod(envs.single_action_space.shape))
        # the forward model reads the action the env executes: the sample clipped to the task's bounds, ClipAction's
        # (which itself takes any action); the policy's log-prob reads the sample
        space = inner_wrapper(envs.envs[0], gym.wrappers.ClipAction).env.action_space
        action_bounds = [torch.tensor(b, dtype=torch.float32, device=device).flatten() for b in (space.low, space.high)]

        agent = Agent(obs_dim, action_dim).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
        model = ForwardModel(obs_dim, action_dim, args.model_hidden_sizes, args.ensemble_size).to(device)
        model_optimizer = optim.Adam(model.parameters(), lr=args.model_learning_rate, fused=True)

        # what a checkpoint saves by state dict (the loop's values: loop_state, below)
        # --interest noise draws from it alone, a stream apart from torch's global one (which `seed` seeds)
        noise_generator = torch.Generator(device).manual_seed(
            int(np.random.SeedSequence((args.seed, 1)).generate_state(1)[0])
        )
        stateful = dict(
            agent=agent,
            optimizer=optimizer,
            model=model,
            model_optimizer=model_optimizer,
            noise_generator=noise_generator,
        )

        # ALGO Logic: Storage setup
        obs = torch.zeros((args.num_steps, args.num_envs, obs_dim)).to(device)
        actions = torch.zeros((args.num_steps, args.num_envs, action_dim)).to(device)
        logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
        rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
        terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
        dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
        values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        int_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
        deltas = torch.zeros((args.num_steps, args.num_envs, obs_dim)).to(device)
        in_region = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool)  # logging only: the changed region

        # TRY NOT TO MODIFY: start the game, or go on from the checkpoint
        iteration = 0
        global_step, phase = 0, 0
        next_obs, _ = envs.reset(seed=args.seed)
        next_obs = torch.tensor(next_obs, dtype=torch.float32, device=device)
        int_reward_scale = IntrinsicRewardScale(
            args.num_envs, args.int_gamma, args.int_scale_decay, device, args.int_scale
        )
        if checkpoint:  # last: building the networks drew from the random states it restores
            state = restore_checkpoint(checkpoint, stateful, device)
            set_env_state(envs, state.pop("envs"))  # with the observation and reward normalisers' statistics
            iteration, global_step, next_obs = state["iteration"], state["global_step"], state["next_obs"]
            phase = state["phase"]
            int_reward_scale = state["int_reward_scale"]

        def loop_state():
            """What the loop carries from one iteration to the next, as a checkpoint saves it."""
            return dict(
                iteration=iteration,
                global_step=global_step,
                phase=phase,
                next_obs=next_obs,
                int_reward_scale=int_reward_scale,
                envs=env_state(envs),
            )

        heldout = continuous_heldout_tensors(args.env, phase, args.eval_steps, args.eval_episode_steps, device)

        run.start_loop(global_step)  # the clock starts; a stop now waits for the iteration's checkpoint
        for iteration in range(iteration + 1, args.num_iterations + 1):
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            iteration_returns = []
            for step in range(0, args.num_steps):
                global_step += args.num_envs
                if phase < len(args.change_steps) and global_step > args.change_steps[phase]:
                    phase += 1  # applies at each env's next reset
                    envs.call("set_phase", phase)
                    heldout = continuous_heldout_tensors(
                        args.env, phase, args.eval_steps, args.eval_episode_steps, device
                    )
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
                if (region := last_steps_in_region(envs)) is not None:
                    in_region[step] = torch.from_numpy(region)
                real_next_obs = torch.tensor(
                    true_next_obs(next_obs_np, infos, done), dtype=torch.float32, device=device
                )
                if truncation.any():  # a truncated episode bootstraps from its final observation
                    with torch.no_grad():
                        final_values[step, truncation] = agent.get_value(real_next_obs[truncation])[0].flatten()
                rewards[step] = torch.tensor(reward, device=device).view(-1)
                if args.no_task_reward or global_step < args.reward_warmstart:
                    rewards[step] = 0.0
                terminations[step] = torch.tensor(termination, device=device, dtype=torch.float32)
                dones[step] = torch.tensor(done, device=device, dtype=torch.float32)
                deltas[step] = real_next_obs - obs[step]
                next_obs = torch.tensor(next_obs_np, dtype=torch.float32, device=device)

                if "final_info" in infos and "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.flatnonzero(infos["final_info"]["_episode"]):
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
                        iteration_returns.append(float(episode["r"][i]))

            # FORWARD MODEL LOGIC: train on this rollout's transitions
            executed = actions.reshape(-1, action_dim).clamp(*action_bounds)
            flat = (obs.reshape(-1, obs_dim), executed, deltas.reshape(-1, obs_dim))
            model_train_loss = train_forward_model(
                model, model_optimizer, *flat, args.model_epochs, args.model_batch_size
            )
            writer.add_scalar("external_model/train_loss", model_train_loss, global_step)
            if iteration % args.eval_every == 0 or iteration == args.num_iterations:
                statistics = [
                    torch.tensor(x, dtype=torch.float32, device=device) for x in observation_statistics(envs.envs[0])
                ]
                for suffix, data in zip(("", "_changed"), heldout):
                    if data is not None:
                        error = raw_heldout_error(model, *data, *statistics)
                        writer.add_scalar(f"external_model/eval_loss{suffix}", error, global_step)

            # POI LOGIC: interest of every stored transition under the updated model, as a normalised reward
            if args.interest == "noise":
                poi = torch.rand((args.num_steps, args.num_envs), generator=noise_generator, device=device)
            else:
                poi = poi_values(model, *flat[:2]).reshape(args.num_steps, args.num_envs)
            int_rewards = poi / (int_reward_scale.update(poi) + 1e-8)

            # bootstrap value if not done
            with torch.no_grad():
                next_value, next_int_value = agent.get_value(next_obs)
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
                int_advantages, int_returns = intrinsic_advantages(
                    int_rewards, int_values, next_int_value.reshape(1, -1), args.int_gamma, args.gae_lambda
                )

            # flatten the batch
            b_obs = obs.reshape((-1, obs_dim))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape((-1, action_dim))
            b_advantages = advantages.reshape(-1)
            b_int_advantages = int_advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_int_returns = int_returns.reshape(-1)

            # without a task reward (--no-task-reward, the warm start) the task advantage is critic noise: weight 0
            ext_weight = 0.0 if args.no_task_reward or global_step < args.reward_warmstart else args.ext_coef
            # the weights as shares of one (Adam undoes a loss's scale, not the ratio of its terms): the mix's std is 1
            # where the two agree, less where not (0.75 if uncorrelated at 2 : 1); with the other weight 0 it is PPO's
            weight_sum = ext_weight + args.int_coef
            ext_share, int_share = (ext_weight / weight_sum, args.int_coef / weight_sum) if weight_sum else (0.0, 0.0)

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
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", int(sps), global_step)
            writer.add_scalar("charts/phase", phase, global_step)
            share = changed_region_share(envs)  # where the agent went since the last log: the region the change acts on
            if share is not None:
                writer.add_scalar("external_model/rollout_changed_share", share, global_step)
                # and the share of the rollout's interest there: whether the signal points where the change acts
                writer.add_scalar("poi/changed_region_interest", share_in_region(poi.cpu(), in_region), global_step)
            writer.add_scalar("losses/int_value_loss", int_v_loss.item(), global_step)
            writer.add_scalar("poi/mean", poi.mean().item(), global_step)
            writer.add_scalar("poi/max", poi.max().item(), global_step)
            writer.add_scalar("poi/intrinsic_reward_mean", int_rewards.mean().item(), global_step)
            mean_return = np.mean(iteration_returns) if iteration_returns else float("nan")
            say(progress_line(global_step, args.total_timesteps, sps, mean_return, model_train_loss))
            run.end_iteration(iteration, global_step, stateful, loop_state)  # the checkpoint when due; a stop if asked

        if args.save_model:
            # the agent acts on normalised observations: clip((obs - mean) / sqrt(var + 1e-8), -10, 10), per env
            stats = [observation_statistics(env) for env in envs.envs]
            means, variances = np.stack([m for m, _ in stats]), np.stack([v for _, v in stats])
            np.savez(run.dir / "obs_normalization.npz", mean=means, var=variances, clip=10.0)
            meta = dict(env=args.env, observation="raw", noise="normal", noise_size=action_dim)
            # the exported policy is evaluated with env 0's statistics
            meta["obs_normalization"] = dict(mean=means[0].tolist(), var=variances[0].tolist(), clip=10.0, epsilon=1e-8)
            run.save_models(agent, obs_dim, meta, agent=agent, forward_model=model)
