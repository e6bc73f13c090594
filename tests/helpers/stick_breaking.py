"""The Fig. 1 prior (Porteous et al. 2006, sec. 4), its data and component, shared by the stick-breaking tests."""

import numpy as np

import dpppl

NKC = dpppl.NormalKnownCov(sigma2=0.3, mu0=0.0, tau2=4.0)
X4 = np.array([-2.0, -1.7, 0.1, 1.9])
FIG1_PRIOR = (5.0, 0.1)  # a_i = 5, b_i = 0.1 (sec. 4)



def native_and_jax_steps(monkeypatch, kernel: str, bound, steps: int = 4, chains: int = 3):
    """`steps` steps of `kernel` on `bound`, vmapped over `chains` chains started from the prior,
    with DPPPL_NATIVE=1 and =0 from the same keys: {"1": [...], "0": [...]}, per step the states'
    labels, counts and the step's info (numpy), and the start's labels."""
    import jax

    from dpppl.kernels import base
    from dpppl.models.init import initial_states

    states = initial_states(bound, "prior", jax.random.split(jax.random.key(2), chains),
                            bound.prior.initial_capacity(bound.num_points))
    x = jax.numpy.asarray(bound.x)
    runs = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("DPPPL_NATIVE", flag)
        kernel_ = base.build(kernel, bound)
        step = jax.jit(jax.vmap(lambda k, s: kernel_.step(k, s, x)))
        state, trace = states, []
        for t in range(steps):
            state, info = step(jax.random.split(jax.random.key(10 + t), chains), state)
            trace.append((np.asarray(state.z), np.asarray(state.stats.n), jax.tree.map(np.asarray, info)))
        runs[flag] = trace
    return runs, np.asarray(states.z)
