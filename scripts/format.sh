#!/usr/bin/env bash
# Formats every C++ file git tracks with the committed .clang-format
# (clang-format 14, as Debian 12 ships it).
#
# Usage: scripts/format.sh            rewrite the files in place
#        scripts/format.sh --check    change nothing; exit 1 naming every file
#                                     that differs (ctest format_test)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *)
    echo "usage: scripts/format.sh [--check]" >&2
    exit 2
    ;;
esac

if ! command -v clang-format-14 >/dev/null 2>&1; then
  echo "format: clang-format-14 is not installed (scripts/test.sh installs it)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files -- '*.cc' '*.h')
if ((${#files[@]} == 0)); then
  echo "format: git lists no C++ files in ${repo}" >&2
  exit 2
fi
if ((!check)); then
  clang-format-14 -i -- "${files[@]}"
  exit 0
fi

# One process for every file; each line of its report names a file that differs.
rc=0
report="$(clang-format-14 --dry-run --Werror -- "${files[@]}" 2>&1)" || rc=$?
mapfile -t drift < <(printf '%s\n' "${report}" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if ((${#drift[@]} > 0)); then
  printf 'format: %d of %d files differ from .clang-format (run scripts/format.sh):\n' \
    "${#drift[@]}" "${#files[@]}" >&2
  printf '  %s\n' "${drift[@]}" >&2
  exit 1
fi
if ((rc != 0)) || [[ -n "${report}" ]]; then
  printf 'format: clang-format-14 failed (exit %d):\n%s\n' "${rc}" "${report}" >&2
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
