"""Static rules, one module each, and what they share.

Per-file rules (`FILE_RULES`) are functions `check(ctx: FileContext) -> list[Finding]` run on both
the head and the merge-base version of every changed Python file (the base version under its head
path, so renames keep fingerprints). The engine keeps a head finding when its line range touches a
line the change adds or modifies, and its first line was changed or its fingerprint is new
compared with the base: a function-wide finding is reported only when the function was touched
and the problem is new (since round 22 also a handler finding off the changed lines whose try now
binds a name the code after it reads, `guarded_code`, reported as another finding). `FileContext.focus` says which lines can still be reported (at head the
changed ones; at base the definitions named by the head findings compared there), so a rule may
skip the rest of a file (broad-except and silent-gate do). Change-wide rules (`cache_key`, `key_docs.check_pr_body`,
`suite_results`, `encoding`) are called by the engine with the whole context.

Rule ids: `broad-except`, `runtime-error-fallback`, `caught-own-subclass`
(broad_except.py); `handler-raises` (handler_raises.py);
`cache-key-change`, `key-ignores-field`, `key-shares-artifacts`, `key-not-reproducible` (cache_key.py;
`key-shares-artifacts.hash-equality`, an `__eq__` that compares hashes only: hash_equality.py;
`key-shares-artifacts.loop-ignores-element`, a key's loop that never reads its element:
loop_element.py); `stale-key-doc`, `unused-key-param`
(key_docs.py); `silent-gate` (silent_gate.py); `suite-failure`, `suite-not-run`, `test-plan`
(suite_results.py); `not-utf8` (encoding.py).
"""

from reviewbot.rules import broad_except, handler_raises, hash_equality, key_docs, loop_element, silent_gate
from reviewbot.rules.common import FileContext, FileRule

FILE_RULES: tuple[FileRule, ...] = (
    broad_except.check,
    handler_raises.check,
    silent_gate.check,
    key_docs.check_file,
    hash_equality.check,
    loop_element.check,
)

__all__ = ["FILE_RULES", "FileContext", "FileRule"]
