"""Reference: the pure core mirroring the design section by section (§1-§11)."""
