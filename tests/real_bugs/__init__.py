"""The real-bug corpus (issue #31): public bug reports of the frameworks our adapters run,
each a regression probe that a named case must catch (tests/real_bugs/corpus.py)."""
