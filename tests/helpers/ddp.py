"""The dependent-DP model file and a small bound model, shared by the DDP tests."""



from dpppl.models.ddp import DDPMixture

MODEL_TEXT = """\
data x : real[N, 2] by t
z ~ DDP(a = 1, b = 2)
theta[k] ~ CoupledGaussian(a = 1, beta = 0.5, delta = 1, b = 1.5, mu0 = [0, 0], nu0 = 4, psi0 = 0.5)
x[i] ~ Normal(theta[z[i]])
"""


def small_model(**kw):
    args = dict(a=1.0, beta=0.5, b=1.5, mu0=[0.0, 0.0], nu0=4.0, psi0=0.5)
    args.update(kw)
    return DDPMixture(args.pop("sticks", (1.0, 2.0)), **args)

