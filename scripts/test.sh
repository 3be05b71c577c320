#!/usr/bin/env bash
# Runs tapml's test suite: go vet, every package's tests, then a short run of
# every fuzz target (FUZZTIME, default 3s each: there are over 100).
set -euo pipefail
cd "$(dirname "$0")/.."

# wgpu/Mesa write sockets and caches here; a private folder keeps stderr quiet.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
	export XDG_RUNTIME_DIR="$(mktemp -d)"
	chmod 700 "$XDG_RUNTIME_DIR"
fi

go vet ./...
go test -count=1 -timeout 25m ./...

# The per-op pass/fail table of ONNX's own node test cases, in the log.
go test -count=1 -run '^TestNodeCases$' -v ./frontend/onnx/ | sed -n '/libonnx-testdata node cases/,/^\(PASS\|FAIL\|ok\)/p'

fuzztime="${FUZZTIME:-3s}"
for file in $(grep -rl --include='*_test.go' '^func Fuzz' .); do
	pkg="./$(dirname "${file#./}")"
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
