"""The change under review: the three-dot diff `merge-base(base, head)..head`, file by file.

Commits on base that the branch lacks never appear (the diff starts at the merge base). Renames
are followed (`-M`), so a file's findings at head are compared with its old path at the base.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools

from unidiff import PatchSet

from reviewbot.gitrepo import GitRepo


@dataclasses.dataclass
class FileChange:
    """One changed file. `added_lines` are head line numbers the change adds or modifies;
    `deletion_points` the head lines on either side of a pure deletion (so a function that only lost
    lines still counts as touched). Both are fixed once `touches` has been asked (it sorts them once)."""

    path: str
    old_path: str | None
    status: str
    added_lines: set[int]
    lines_added: int
    lines_removed: int
    deletion_points: set[int] = dataclasses.field(default_factory=set)

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")

    @functools.cached_property
    def _touched(self) -> list[int]:
        return sorted(self.added_lines | self.deletion_points)

    def touches(self, start: int, end: int) -> bool:
        """Whether lines `start`..`end` hold an added line or a deletion point."""
        at = bisect.bisect_left(self._touched, start)
        return at < len(self._touched) and self._touched[at] <= end


def diff_files(repo: GitRepo, merge_base: str, head: str) -> list[FileChange]:
    text = repo.git(
        "-c", "core.quotepath=false", "diff", "-M", "--no-color", "--unified=0", "--no-ext-diff", merge_base, head
    )
    changes: list[FileChange] = []
    for patched in PatchSet(text):
        if patched.is_removed_file:
            status, path, old_path = "removed", _strip(patched.source_file), None
        elif patched.is_added_file:
            status, path, old_path = "added", _strip(patched.target_file), None
        else:
            path = _strip(patched.target_file)
            status = "renamed" if patched.is_rename else "modified"
            old_path = _strip(patched.source_file)
        added = {line.target_line_no for hunk in patched for line in hunk if line.is_added and line.target_line_no}
        deletions = {
            point
            for hunk in patched
            if hunk.removed and not hunk.added
            for point in (hunk.target_start, hunk.target_start + 1)
        }
        changes.append(
            FileChange(
                path=path,
                old_path=old_path,
                status=status,
                added_lines=added,
                lines_added=patched.added,
                lines_removed=patched.removed,
                deletion_points=deletions,
            )
        )
    return changes


def _strip(name: str) -> str:
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name
