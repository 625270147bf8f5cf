"""mlte ots_virtual package."""
