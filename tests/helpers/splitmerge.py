"""The split-merge proposal methods, shared by the unit and exactness tests."""



METHODS = ["sams", "restricted_gibbs"]

