"""Reference runtime: the imperative shell (SQLite store, CommitCoordinator, loop)."""
