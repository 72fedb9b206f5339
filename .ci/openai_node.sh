#!/usr/bin/env bash
# openai_node.sh runs packages serve and record against OpenAI's official
# Node client (their TestOpenAINodeClient, which skip without it; record's
# runs the client's own tool-calling agent loop): it installs the
# npm package openai, at a pinned version, into a temporary folder and
# points the test at it. Needs node and npm; without them it says so and
# skips, as the fake-driver tests do without g++.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "no node or npm: serve's test with OpenAI's Node client is skipped"
	exit 0
fi
node --version
mods=$(mktemp -d)
trap 'rm -rf "$mods"' EXIT
# openai 6.x runs on Node 20 and later; 7.x needs Node 22.
(cd "$mods" && npm install --silent --no-audit --no-fund openai@6.49.0 >/dev/null)
AGENTRL_OPENAI_NODE_MODULES="$mods/node_modules" go test -count=1 -run TestOpenAINodeClient -v ./serve ./record |
	grep -E '^(---|PASS|FAIL|ok)'
