"""mlte pce package."""
