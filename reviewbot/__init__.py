"""The review bot that guards pull requests to the magi_compiler backend."""
