"""The NormalLogNormal family and data shared by the non-conjugate tests."""

import jax
import jax.numpy as jnp
import numpy as np

import dpppl

X_SMALL = np.array([[-1.0], [-0.6], [0.1], [0.4], [1.2]])
FAMILY = dpppl.NormalLogNormal(m0=0.0, s0=2.0, l0=float(np.log(0.5)), t0=0.5)
FAMILY_ALPHA = 1e-3  # false-alarm rate of each test's group of checks


def _resolved(x=X_SMALL):
    return FAMILY.resolve(np.asarray(x, float))


def _stats(fam, x):
    return jax.tree.map(lambda p: jnp.sum(p, axis=0), fam.point_stats(jnp.asarray(x, float)))

