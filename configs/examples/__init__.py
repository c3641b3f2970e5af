"""Example teams orchestrated by workflows: in Python (`research`) and in YAML (the others)."""
