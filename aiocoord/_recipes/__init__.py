"""Layer 2: recipes, built on the client's public surface only."""
