"""Experiments: what the review runs on the head revision to confirm or refute a finding.

Each experiment runs the revision's code through `reviewbot.sandbox` (fresh interpreter, fixed
hash seed unless the experiment varies it, no network, a time limit) inside the `static` suites
mode, and reports what it saw as a finding's evidence (`EvidenceKind.EXPERIMENT`). An experiment
that cannot run leaves its findings unconfirmed and says why.

`exception_injection`: raises an error a catch-all or `RuntimeError` fallback must not swallow at
the start of its try body and runs the tests: swallowed confirms the finding (where the try body
calls code of the repository or of a library, so that such an error can arise there), propagated
refutes it.

`key_stability`: the key-reproducibility experiment (the probe run again at base and head, in
another worktree with another `PYTHONHASHSEED`).
"""
