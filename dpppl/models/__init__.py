"""Models: a partition prior, a component family and a data declaration; bound to data, a
model is a *target* the kernels and the driver sample (`dpppl.core.protocols`)."""
