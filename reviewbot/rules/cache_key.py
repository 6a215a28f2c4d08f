"""`cache-key-change` (P4-PROCESS) and `key-ignores-field` (P0-BLOCKER), from a `KeyChange`.

A change the probe confirms is a P4 finding naming the changed factors and the old and new key of
every reference case (the service labels the PR `cache: invalidates`, the release notes warn).
A change the probe does not confirm appears in the summary only. A field added to a hashed config
class that the key does not see is P0: two configs differing only in that field share artifacts.
"""

from __future__ import annotations

from reviewbot.findings import Finding, Severity
from reviewbot.keychange import KeyChange


def check(change: KeyChange) -> list[Finding]:
    findings: list[Finding] = []
    for field in change.new_fields:
        if not field.ignored:
            continue
        findings.append(
            Finding(
                rule="key-ignores-field",
                severity=Severity.P0,
                path=field.path,
                line_start=field.line,
                line_end=field.line,
                message=f"new field `{field.field}` of hashed config class `{field.class_name}` is not part of the cache key",
                why=f"Two configurations that differ only in `{field.field}` map to the same cache directory and load "
                f"each other's compiled artifacts. Evidence: {field.evidence}.",
                fix=f"Include `{field.field}` in the class's hash (or, if it cannot affect compiled code, exclude it "
                "by name with a comment saying why).",
                message_zh=f"哈希配置类 `{field.class_name}` 的新字段 `{field.field}` 没有进入缓存键",
                why_zh=f"仅在 `{field.field}` 上不同的两份配置会映射到同一个缓存目录，并加载彼此的编译产物。依据：{field.evidence}。",
                fix_zh=f"把 `{field.field}` 纳入该类的哈希（如果它不可能影响编译结果，则按名字排除并注释原因）。",
                qualname=field.class_name,
            )
        )
    if change.confirmed:
        first = change.closure_changes[0] if change.closure_changes else None
        factors = ", ".join(change.factors_changed) or "(key differs)"
        rows = "; ".join(f"{c.case}: {c.old_key} -> {c.new_key}" for c in change.cases if c.changed)
        findings.append(
            Finding(
                rule="cache-key-change",
                severity=Severity.P4,
                path=first.path if first else "(cache key)",
                line_start=first.line if first else 0,
                line_end=first.end_line if first else 0,
                message=f"this change alters the compiled-artifact cache key (factors changed: {factors})",
                why="Every existing cache misses after the upgrade; deployments running with `assert_cache_hit` fail "
                "until they rebake. Keys per reference case: " + rows,
                fix="Say so in the PR description and the release notes (label `cache: invalidates`); tell operators to "
                "clear or rebake `cache_root_dir` and to warm up before turning `assert_cache_hit` back on.",
                message_zh=f"本次改动改变了编译产物的缓存键（变化的因子：{factors}）",
                why_zh="升级后所有现有缓存都会未命中；开启 `assert_cache_hit` 的部署在重新生成缓存前会失败。各参考用例的键："
                + rows,
                fix_zh="在 PR 描述和发布说明中注明（标签 `cache: invalidates`）；提醒运维清空或重新生成 `cache_root_dir`，"
                "并在重新开启 `assert_cache_hit` 前先做一次预热运行。",
                qualname=first.name if first else "",
                in_diff=False,
                details=rows,
            )
        )
    return findings
