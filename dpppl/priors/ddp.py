"""Per-slice stick-breaking priors of the dependent Dirichlet process (Porteous et al. 2006).

In every time slice t the mixture weights follow a stick-breaking construction
(sec. 3.1),

    pi_{t,i} = V_{t,i} prod_{j<i} (1 - V_{t,j}),     V_{t,i} ~ Beta(a_i, b_i),   i = 1, 2, ...

independently across slices, with the same (a_i, b_i) in every slice (sec. 5). DP(alpha)
is a_i = 1, b_i = alpha; Pitman-Yor(d, theta) is a_i = 1 - d, b_i = theta + i d. The
sticks of one slice are those of [`StickBreaking`][dpppl.priors.stick_breaking.StickBreaking], and
so are its formulas, applied slice by slice to the counts N_{t,i} (a leading axis of
slices): the labelled assignment of slice t has probability (sticks integrated out, the
finite form of eq. 5; [`log_prob_labels`][dpppl.StickBreaking.log_prob_labels])

    P(Z_t) = prod_i B(a_i + N_{t,i}, b_i + M_{t,i}) / B(a_i, b_i),   M_{t,i} = sum_{j>i} N_{t,j},

and the prediction rule of the collapsed sticks is E[pi_{t,i} | Z_t] (eq. 6,
[`log_expected_weights`][dpppl.StickBreaking.log_expected_weights]), whose remaining stick past the capacity C is
the lumped weight of every label that no slice uses (sec. 5, after eq. 10). The stick
parameters take every form StickBreaking takes (numbers, finite sequences ending with
b_L = 0, vectorised callables and expressions of the stick index i), with the same check
that the weights sum to one (footnote 1).
"""

from __future__ import annotations

import dataclasses

from dpppl.priors.stick_breaking import StickBreaking


@dataclasses.dataclass(frozen=True)
class DDP(StickBreaking):
    """The partition prior of a dependent Dirichlet process mixture over time slices:
    in every slice, stick-breaking weights with sticks V_{t,i} ~ Beta(a_i, b_i).

    Parameters
    ----------
    a, b : number, sequence, callable of i, or expression of i; default 1.0
        The Beta parameters of the sticks, as for [`StickBreaking`][dpppl.priors.ddp.StickBreaking]; `a = 1,
        b = alpha` gives a DP(alpha) in every slice (the default is DP(1)),
        `a = 1 - d, b = theta + i * d` a Pitman-Yor process in every slice, and a
        finite sequence ending with b_L = 0 a prior on L labels.
    check : bool, default True
        Check that the weights sum to one (footnote 1).
    """

    name = "DDP"


__all__ = ["DDP"]
