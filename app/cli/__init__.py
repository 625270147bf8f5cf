"""The `mlte` command line: one module per subcommand, each exposing ``register(subparsers)``."""
