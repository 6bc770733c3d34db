"""State-machine tests, split by spec section (a package, so its conftest does not shadow tests/conftest)."""
