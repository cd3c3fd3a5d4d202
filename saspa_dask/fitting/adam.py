"""Adam (Kingma & Ba 2015): an ascent step per coordinate from the gradient's running
moments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Adam"]


@dataclass
class Adam:
    """Adam (Kingma & Ba) ascending an objective, step sizes per coordinate."""

    rate: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def step(self, grad, scale):
        if self.m is None:
            self.m, self.v = np.zeros_like(grad), np.zeros_like(grad)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1 ** self.t)
        v_hat = self.v / (1 - self.beta2 ** self.t)
        return self.rate * scale * m_hat / (np.sqrt(v_hat) + self.eps)
