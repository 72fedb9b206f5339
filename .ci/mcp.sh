#!/usr/bin/env bash
# tool/mcp against the official MCP reference servers from npm,
# @modelcontextprotocol/server-everything and server-filesystem, at the
# versions .ci/mcp/package-lock.json pins: installed with npm ci into a
# cache folder (again only when the lock file changes), then the tests
# that skip without AGENTRL_MCP_NODE_MODULES run with it set. Needs Node
# 20 or later and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
command -v node >/dev/null && command -v npm >/dev/null || {
	echo "MCP: node and npm are needed to run the reference servers" >&2
	exit 1
}
node --version

dir=${AGENTRL_MCP_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrl/mcp-servers}
if ! cmp -s .ci/mcp/package-lock.json "$dir/package-lock.json" || [ ! -d "$dir/node_modules" ]; then
	rm -rf "$dir.partial"
	mkdir -p "$dir.partial"
	cp .ci/mcp/package.json .ci/mcp/package-lock.json "$dir.partial/"
	(cd "$dir.partial" && npm ci --no-audit --no-fund --loglevel=error)
	rm -rf "$dir"
	mv "$dir.partial" "$dir"
fi
(cd "$dir" && npm ls --depth=0)

out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! AGENTRL_MCP_NODE_MODULES="$dir/node_modules" go test -count=1 -run NPM -v ./tool/mcp >"$out" 2>&1; then
	grep -vE '^=== (RUN|PAUSE|CONT)' "$out" >&2
	exit 1
fi
grep -E '^(--- |ok)' "$out"
if grep -q -- '--- SKIP' "$out"; then
	echo "MCP: tests were skipped" >&2
	exit 1
fi
echo "MCP checks done in $((SECONDS - start)) s"
