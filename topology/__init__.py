"""mlte topology package."""
