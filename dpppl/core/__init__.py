"""The bottom layer: the partition state, the protocols every model, prior and kernel
implements, small numerics and the expression language of hyperparameters."""
