#!/bin/sh
# The image's ENTRYPOINT: seed the writable numba cache from the one baked into the image, then
# run `strata-policy` with the container's arguments (CMD is `serve`).
#
# The image compiles every kernel at build time for a portable CPU target (NUMBA_CPU_NAME=generic)
# into $STRATA_NUMBA_SEED, which is read-only at run time (readOnlyRootFilesystem). numba needs
# to write beside what it loads, so the kernels are copied into NUMBA_CACHE_DIR (an emptyDir or a
# tmpfs) before the server starts: a fresh pod loads them in about a second instead of compiling
# for a minute. The copy keeps the files' times but is made writable (the seed may be read-only
# by mode, and numba refuses a cache folder it cannot write). It is made under a temporary name
# and renamed, so a container killed mid-copy never leaves a half cache behind; a cache already
# there (a container restart with the same emptyDir) is kept.
set -eu

seed="${STRATA_NUMBA_SEED:-/opt/strata/numba-cache}"
cache="${NUMBA_CACHE_DIR:-}"

if [ -n "$cache" ]; then
  if ! mkdir -p "$cache" 2>/dev/null || ! ( : > "$cache/.probe" ) 2>/dev/null; then
    echo "strata-entrypoint: NUMBA_CACHE_DIR=$cache is not writable: mount an emptyDir there" \
      "(Kubernetes) or add --tmpfs $cache (docker run --read-only)" >&2
    exit 1
  fi
  rm -f "$cache/.probe"
  for kernels in "$seed"/*; do
    [ -d "$kernels" ] || continue
    name="${kernels##*/}"
    if [ ! -e "$cache/$name" ]; then
      rm -rf "$cache/.$name.partial"
      cp -R -p "$kernels" "$cache/.$name.partial"
      chmod -R u+w "$cache/.$name.partial"  # numba writes beside what it loads
      mv "$cache/.$name.partial" "$cache/$name"
    fi
  done
fi

exec strata-policy "$@"
