"""The Fig. 1 prior (Porteous et al. 2006, sec. 4), its data and component, shared by the stick-breaking tests."""

import numpy as np

import dpppl

NKC = dpppl.NormalKnownCov(sigma2=0.3, mu0=0.0, tau2=4.0)
X4 = np.array([-2.0, -1.7, 0.1, 1.9])
FIG1_PRIOR = (5.0, 0.1)  # a_i = 5, b_i = 0.1 (sec. 4)

