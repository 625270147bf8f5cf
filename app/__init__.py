"""mlte app package."""
