"""Module-level data and functions shared by test files in different folders, one module
per topic (fixtures shared that way live in the nearest common conftest.py)."""
