"""MAP clustering by A*/beam search (Daume 2007), also behind `init="search"`."""

from dpppl.models.init import from_labels, register_init
from dpppl.priors.stick_breaking import refuse_labelled
from dpppl.search.beam import SearchResult, map_search


def search_init(target, keys, capacity=None):
    """Every chain starts from one MAP search (inadmissible score, beam 100; Daume 2007)."""
    refuse_labelled(target.prior, "init='search' (MAP search)")
    data = target.observed()[target.model.data.name]  # as given: map_search binds them again
    found = map_search(target.model, data, heuristic="inadmissible", beam=100).labels
    return from_labels(found)(target, keys, capacity)


register_init("search", search_init)

__all__ = ["SearchResult", "map_search", "search_init"]
