"""The workspace's diff against the base commit, computed inside the sandbox by one bash script
that both backends run (``LocalSandbox.diff``, ``DockerSandbox.diff``).

What the agent wrote is data here, never configuration: git runs with the sandbox's own base
objects (``$GIT_DIR``, which no command can write), no system, global or repository config
(the workspace's ``.git`` is never git's directory), a throw-away index and object directory
(``$SCRATCH``), and, decisively, with nothing that can consult attributes:

1. ``git ls-files --cached --others --exclude-standard`` lists the tracked files and the
   untracked ones that ``.gitignore`` does not ignore (listing reads ignore rules, never
   attributes);
2. each listed path is entered in the index from its bytes: a regular file by
   ``git hash-object --no-filters`` (no ``text``/``eol``/``ident``/``filter``/
   ``working-tree-encoding`` conversion: the blob is the file's bytes), a symbolic link by
   its target, with the executable bit as git keeps it; a missing path, a directory that
   replaced a file and a special file (fifo, socket, device) leave the index;
3. ``git diff-tree`` compares the base tree with that tree in a bare context (an empty
   directory, no work tree, an empty index, ``attr.tree`` set to the empty tree for gits
   that read attributes from a tree): no ``.gitattributes`` of the agent's can make a change
   binary, hide it, or reroute it to a diff driver. Binary files are binary by their
   content alone.

Environment: ``BASE`` (the base commit), ``GIT_DIR`` (the base objects), ``SCRATCH`` (a fresh
directory the script fills and removes at the end), ``OUT`` (a file outside ``SCRATCH`` for
the patch, or empty for stdout). The script runs in the workspace (its working directory).
"""

from __future__ import annotations

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

DIFF_SCRIPT = f"""set -eu
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 HOME="$SCRATCH" XDG_CONFIG_HOME="$SCRATCH"
export GIT_INDEX_FILE="$SCRATCH/index" GIT_OBJECT_DIRECTORY="$SCRATCH/objects"
export GIT_ALTERNATE_OBJECT_DIRECTORIES="$GIT_DIR/objects"
unset GIT_WORK_TREE GIT_ATTR_SOURCE GIT_CEILING_DIRECTORIES
trap 'rm -rf "$SCRATCH"' EXIT
git_() {{ git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c attr.tree={EMPTY_TREE} "$@"; }}
mkdir -p "$SCRATCH/objects" "$SCRATCH/empty"
git_ read-tree "$BASE"
GIT_WORK_TREE=. git_ ls-files -z --cached --others --exclude-standard > "$SCRATCH/list"
declare -A executable=()
while IFS= read -r -d '' path; do executable[$path]=1; done < <(
  find . -path ./.git -prune -o -type f -perm -u=x -printf '%P\\0')
regular=()
: > "$SCRATCH/info"
zero=0000000000000000000000000000000000000000
while IFS= read -r -d '' path; do
  if [ -L "$path" ]; then
    blob=$(readlink -n -- "$path" | git_ hash-object -w --stdin)
    printf '120000 %s\\t%s\\0' "$blob" "$path" >> "$SCRATCH/info"
  elif [ -f "$path" ]; then
    regular+=("$path")
  elif [ -d "$path" ] && [ -e "$path/.git" ]; then
    :  # a nested repository: left as the base has it
  else
    printf '0 %s\\t%s\\0' "$zero" "$path" >> "$SCRATCH/info"
  fi
done < "$SCRATCH/list"
entry() {{  # the index line of regular file $1 whose blob is $2
  local mode=100644
  if [ -n "${{executable[$1]+x}}" ]; then mode=100755; fi
  printf '%s %s\\t%s\\0' "$mode" "$2" "$1" >> "$SCRATCH/info"
}}
batch=()
for path in "${{regular[@]+"${{regular[@]}}"}}"; do
  if [[ $path == *$'\\n'* ]]; then  # --stdin-paths reads lines: such a name goes alone
    entry "$path" "$(git_ hash-object -w --no-filters -- "$path")"
  else
    batch+=("$path")
  fi
done
if [ ${{#batch[@]}} -gt 0 ]; then
  mapfile -t blobs < <(
    printf '%s\\n' "${{batch[@]}}" | git_ hash-object -w --no-filters --stdin-paths)
  if [ ${{#blobs[@]}} -ne ${{#batch[@]}} ]; then
    echo "git hash-object hashed ${{#blobs[@]}} of ${{#batch[@]}} files" >&2
    exit 1
  fi
  for i in "${{!batch[@]}}"; do entry "${{batch[$i]}}" "${{blobs[$i]}}"; done
fi
git_ update-index -z --index-info < "$SCRATCH/info"
tree=$(git_ write-tree)
cd "$SCRATCH/empty"
output=()
if [ -n "$OUT" ]; then output=("--output=$OUT"); fi
GIT_INDEX_FILE="$SCRATCH/none" git_ -c core.bare=true diff-tree -r -p --binary --full-index \\
  --no-renames --no-color --no-ext-diff --no-textconv "${{output[@]+"${{output[@]}}"}}" \\
  "$BASE" "$tree"
"""
