"""Running statistics for normalising rewards (result-neutral bookkeeping)."""

from __future__ import annotations

import numpy as np


class RunningMeanStd:
    """Mean and variance of every value seen so far, merged batch by batch (Chan et al.)."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 0

    def update(self, batch: np.ndarray) -> None:
        batch = np.asarray(batch, dtype=np.float64).reshape(-1, *self.mean.shape)
        n, batch_mean, batch_var = len(batch), batch.mean(0), batch.var(0)
        if self.count == 0:
            self.mean, self.var, self.count = batch_mean, batch_var, n
            return
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.mean, self.var, self.count = self.mean + delta * n / total, m2 / total, total


class DiscountedReturnStd:
    """Running std of the discounted return of a reward stream, one return per env, never
    reset at episode ends (intrinsic rewards are non-episodic). Dividing rewards by it keeps
    their scale steady while the source of the reward (a model's uncertainty) drifts."""

    def __init__(self, num_envs: int, gamma: float):
        self.gamma = gamma
        self.returns = np.zeros(num_envs)
        self.rms = RunningMeanStd()

    def update(self, rewards: np.ndarray) -> float:
        """Feed a (num_steps, num_envs) block of rewards; returns the std after it."""
        seen = []
        for reward in np.asarray(rewards, dtype=np.float64):
            self.returns = self.returns * self.gamma + reward
            seen.append(self.returns.copy())
        self.rms.update(np.stack(seen))
        return float(np.sqrt(self.rms.var))
