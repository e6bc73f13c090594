"""Sub-cluster splits and merges (Chang & Fisher 2013)."""
