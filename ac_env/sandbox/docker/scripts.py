"""The shell scripts a Docker sandbox runs inside its container (bash, as the container's root,
which holds no capability). Values reach them as environment variables, never spliced in."""

from __future__ import annotations

from ac_env.sandbox.workspace_diff import DIFF_SCRIPT

BASE_PARENT = "/opt/autocompact"
BASE_GIT = f"{BASE_PARENT}/base.git"
"""The base commit's objects: written once at start, owned by nobody and read-only, so that a
command (root without capabilities) can neither change nor remove them."""
STAGE = f"{BASE_PARENT}-stage"
"""Where PREPARE gathers the base objects (git packs them inside the repo's .git, whose file
system may be the quota's volume, and they are moved here)."""

INIT = "trap '' TERM INT HUP; while :; do sleep 2147483647; done"
"""PID 1: outlives ``kill -KILL -1`` (which spares PID 1) and reaps orphans (bash waits for
every child), so killed processes leave no zombies that would hold the PID limit."""

COMMAND = (
    'exec 3>&2 2>&1; bash -c "$1" 3>&-; status=$?; kill -KILL -1 2>/dev/null;'
    ' stat -f -c "%a %S" . /tmp >&3 2>/dev/null; exit "$status"'
)
"""Runs one agent command (``$1``), then kills every process but PID 1: nothing a command
starts (``nohup``, ``setsid``, daemons) outlives it. The command's output goes to stdout;
then the free blocks and block size of the workspace's and /tmp's file systems go to stderr
(which the command cannot write: fd 3 is closed for it), for the disk quota's note."""

KILL_ALL = "kill -KILL -1 2>/dev/null; exit 0"

_GIT = "git -c safe.directory='*' -c core.hooksPath=/dev/null"

_SINGLE_COMMIT_GIT = f"""
rebuild_git() {{  # the workspace's .git: the base commit only, on $branch
  rm -rf .git
  {_GIT} init -q -b "$branch" .
  cp "$1"/objects/pack/pack-* .git/objects/pack/
  if [ -f "$1/info/exclude" ]; then cp "$1/info/exclude" .git/info/exclude; fi
  {_GIT} update-ref "refs/heads/$branch" "$base"
  {_GIT} reset -q
}}
"""

PREPARE = f"""set -eu
cd "$WORKDIR"
{_SINGLE_COMMIT_GIT}
head=$({_GIT} rev-parse --verify -q 'HEAD^{{commit}}') || {{
  echo "$WORKDIR holds no git repository with a commit at HEAD" >&2; exit 3; }}
[ -w . ] && [ -w .git ] || {{
  echo "$WORKDIR is not writable by the container's root, which holds no capability:" \\
    "its files must be owned by root (uid 0)" >&2; exit 3; }}
if {_GIT} rev-parse --verify -q 'HEAD^' >/dev/null; then
  export GIT_AUTHOR_NAME=AutoCompact GIT_AUTHOR_EMAIL=base@autocompact.invalid
  export GIT_COMMITTER_NAME=AutoCompact GIT_COMMITTER_EMAIL=base@autocompact.invalid
  export GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_DATE=2000-01-01T00:00:00Z
  base=$({_GIT} commit-tree 'HEAD^{{tree}}' -m base)
else
  base=$head
fi
branch=$({_GIT} symbolic-ref --short -q HEAD || echo main)
rm -rf "$STAGE"
mkdir -p "$STAGE/base.git/objects/pack" "$STAGE/base.git/refs" "$STAGE/base.git/info"
{_GIT} rev-list --objects "$base" | {_GIT} pack-objects -q .git/pack >/dev/null
mv .git/pack-* "$STAGE/base.git/objects/pack/"
full=none
if [ "$WARM" = 1 ]; then
  full=$(GIT_INDEX_FILE="$STAGE/full.index" sh -c \
    "{_GIT} add -A -f . && {_GIT} write-tree")
  {_GIT} rev-list --objects "$full" | {_GIT} pack-objects -q .git/full >/dev/null
  mv .git/full-* "$STAGE/base.git/objects/pack/"
  rm -f "$STAGE/full.index"
fi
if [ -f .git/info/exclude ]; then cp .git/info/exclude "$STAGE/base.git/info/exclude"; fi
printf '%s\\n' "$base" > "$STAGE/base.git/HEAD"
printf '%s\\n' "$branch" > "$STAGE/base.git/branch"
rebuild_git "$STAGE/base.git"
printf '%s %s\\n' "$base" "$full"
"""
"""Turns the repo at $WORKDIR into a one-commit history (a repo with more commits, as in
SWE-bench images, gets a new root commit holding HEAD's tree: no future commit, reflog, stash
or dangling object stays reachable) and stages the base objects in $STAGE/base.git, which the
host then installs, read-only, at BASE_GIT. With WARM=1 it also stores the tree of every file
present (ignored ones too) for ``RESET``. Prints ``<base commit> <full tree or none>``."""

_ISOLATED_GIT_ENV = f"""tmp=$(mktemp -d {BASE_PARENT}-git.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/objects"
export GIT_DIR="$BASE_GIT" GIT_WORK_TREE="$WORKDIR" GIT_INDEX_FILE="$tmp/index"
export GIT_OBJECT_DIRECTORY="$tmp/objects" GIT_ALTERNATE_OBJECT_DIRECTORIES="$BASE_GIT/objects"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 HOME="$tmp" XDG_CONFIG_HOME="$tmp"
"""
"""git's index and new objects go to a scratch directory outside /tmp (which a command may
have filled to its quota), under the sandbox's own ``BASE_PARENT`` prefix."""

DIFF = f"""cd "$WORKDIR"
SCRATCH=$(mktemp -d {BASE_PARENT}-git.XXXXXX)
export SCRATCH GIT_DIR="$BASE_GIT" OUT=
{DIFF_SCRIPT}"""
"""The workspace against the base commit (``workspace_diff``), with a scratch directory outside
/tmp (which a command may have filled to its quota), under the sandbox's own prefix."""

RESET = f"""set -eu
kill -KILL -1 2>/dev/null || true
find /tmp -mindepth 1 -delete
{_ISOLATED_GIT_ENV}
cd "$WORKDIR"
find . -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +
{_GIT} read-tree "$FULL"
{_GIT} checkout-index -a -f
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
branch=$(cat "$BASE_GIT/branch")
base=$BASE
{_SINGLE_COMMIT_GIT}
rebuild_git "$BASE_GIT"
"""
"""Warm reset: kill every process, empty /tmp, and rewrite the workspace from the stored
tree of every file it held at start (ignored files included), then its one-commit .git."""

RESOLVE = 'cd "$WORKDIR" && realpath -m -- "$1"'

ARCHIVE = 'tar -C "$1" --numeric-owner --hard-dereference -cf - .'
"""A directory's contents as a tar archive on stdout (through an exec: the archive API of the
daemon does not see into the tmpfs /tmp); a hard-linked file's content under each of its names
(restores refuse hard links)."""

RESTORE = """set -eu
find "$WORKDIR" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
find /tmp -mindepth 1 -delete
cp -a --no-preserve=ownership "$STAGE/repo/." "$WORKDIR/"
cp -a --no-preserve=ownership "$STAGE/tmp/." /tmp/
rm -rf "$STAGE"
"""
"""Replaces the workspace and /tmp by a snapshot unpacked in $STAGE (``repo/``, ``tmp/``).
Files become the container root's (commands run as it, and it may not chown: a local
sandbox's snapshot holds nobody's files)."""
