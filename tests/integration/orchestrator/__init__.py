"""The Hatchet provider on a real engine (a package, so its conftest does not shadow tests/conftest)."""
