"""The optimizer of the train step: warmup, constant and cosine schedules, clipping, AdamW."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from deepswe_jax.rl.optimizer import OptimizerSettings, learning_rate_schedule, make_optimizer


def test_optimizer_warmup_and_clipping():
    rl = OptimizerSettings(lr=1e-3, warmup_steps=4, weight_decay=0.0, grad_clip=1.0)
    schedule = learning_rate_schedule(rl)
    assert [float(schedule(s)) for s in (0, 2, 4, 100)] == pytest.approx([0.0, 5e-4, 1e-3, 1e-3])
    optimizer = make_optimizer(rl)
    params = {"w": jnp.ones(3)}
    state = optimizer.init(params)
    update = jax.jit(optimizer.update)
    for _ in range(5):
        updates, state = update({"w": jnp.array([300.0, -400.0, 0.0])}, state, params)
    # Adam after clipping to norm 1: lr-sized steps against the gradient's sign.
    np.testing.assert_allclose(updates["w"][:2], [-1e-3, 1e-3], rtol=1e-3)
