"""Experiments: what the review runs on the head revision to confirm or refute a finding.

Each experiment runs the revision's code through `reviewbot.sandbox` (fresh interpreter, fixed
hash seed unless the experiment varies it, no network, a time limit) inside the `static` suites
mode, and reports what it saw as a finding's evidence (`EvidenceKind.EXPERIMENT`). An experiment
that cannot run leaves its findings unconfirmed and says why.

`key_stability`: the key-reproducibility experiment (the probe run again at base and head, in
another worktree with another `PYTHONHASHSEED`).
"""
