"""The small data sets of :func:`dpppl.testing.small_datasets`, by name, shared by kernel tests."""


from dpppl.testing import small_datasets

CASES = {case.name: case for case in small_datasets()}

