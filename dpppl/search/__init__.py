"""MAP clustering by A*/beam search (Daume 2007)."""

from dpppl.search.beam import SearchResult, map_search

__all__ = ["SearchResult", "map_search"]
