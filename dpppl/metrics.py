"""Agreement between two clusterings (ARI, NMI, VI, pairwise F-score): the functions of
`dpppl.analysis.metrics` under their documented path, so that
`from dpppl.metrics import adjusted_rand_index` works."""

from dpppl.analysis.metrics import (PairwiseScores, adjusted_rand_index, contingency, normalized_mutual_information,
                                    pairwise_f_score, pairwise_scores, variation_of_information)

__all__ = ["adjusted_rand_index", "contingency", "normalized_mutual_information", "pairwise_f_score",
           "pairwise_scores", "PairwiseScores", "variation_of_information"]
