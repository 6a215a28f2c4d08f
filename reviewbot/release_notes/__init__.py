"""`reviewbot release-notes`: release notes between two refs, opening with an upgrade warning
whenever the compiled-artifact cache key differs between them.

Modules: `settings` (the `release_notes` section of `.reviewbot.yml`), `history` (changes
between two refs from git), `categorize` (labels, then subject prefixes), `github_lookup`
(PR titles/labels/authors and the draft release through PyGithub), `upgrade` (the cache-key
check between the refs and per change), `render` (Jinja2 markdown and JSON), `command`
(the subcommand).
"""
