"""mlte mininet_labs package."""
