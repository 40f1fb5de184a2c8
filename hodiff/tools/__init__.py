"""Tools: derivative checks and their reports, graph files, the CLI and the docs generator."""
