"""Core building blocks: flat parameter views, targets, posteriors, kernels, the driver."""
