"""frontends package."""
