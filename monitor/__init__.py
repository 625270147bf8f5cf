"""mlte monitor package."""
