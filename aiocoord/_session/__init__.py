"""Layer 1: the session. The only package that talks to aiozk."""
