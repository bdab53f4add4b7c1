// Package worktree gives a child instance its own git worktree of the
// parent's repository, on a branch named after the instance, and brings the
// result back: a commit and a diff summary on completion, removal on failure,
// a merge into the parent's branch on request, and cleanup of the worktrees
// of instances that died.
//
// Decisions, and why:
//
//   - Worktrees live in <git common dir>/deputy-worktrees/<id> (normally
//     <repo>/.git/deputy-worktrees/<id>). Inside .git they never show up in the
//     parent's `git status`, need no .gitignore entry, and `git clean -fdx` in
//     the parent cannot touch them, so nothing reaches the parent's tree. The
//     directory is always writable where the repository is, sits on the same
//     filesystem, is found again from the id alone after a crash (no registry
//     to keep), and goes away with the repository. A sibling directory would
//     litter the directory that holds the repository (which may not be
//     writable); a temporary directory would be lost on reboot while the
//     branch stays. A sandbox that binds the worktree read-write must keep the
//     rest of .git (hooks, config) read-only.
//   - The branch is deputy/<id>, based on the parent workspace's HEAD (its
//     last commit: the parent's uncommitted edits are not in the child's tree).
//   - deputy runs the git binary, never a Go git library, with the caller's
//     GIT_* variables removed, an explicit identity ("deputy
//     <deputy@localhost>") so it works with no git configuration, LC_ALL=C so
//     messages are stable, and hooks, fsmonitor and signing off: these calls
//     run over files an untrusted child wrote, and no program of the user's
//     should run on them unattended. For the same reason git calls on a child's
//     worktree name its administrative directory explicitly (--git-dir) instead
//     of trusting the .git file the child could have rewritten.
//   - deputy's own git calls are serialized per repository (a mutex keyed by
//     the common dir), and a call that meets a lock held by another process
//     (index.lock, a ref lock) is retried with backoff.
//   - A deputy branch that holds nothing the parent's HEAD lacks (never
//     committed to, or already merged) is deleted with its worktree; one with
//     unmerged commits is kept, so `deputy merge ID` can still merge it.
//   - Merge checks for conflicts with `git merge-tree --write-tree` before
//     touching the parent's tree, so a conflict leaves it exactly as it was; a
//     conflict the real merge meets anyway is aborted.
package worktree
