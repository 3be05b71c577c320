#!/usr/bin/env bash
# Runs tapml's test suite: go vet, every package's tests, then a short run of
# every fuzz target (FUZZTIME executions each, default 4000x).
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

# The hostile-input table (issue 18's classes against tapmlc and tapmlc serve), in the log.
go test -count=1 -run '^TestHostileInputs$' -v ./cmd/tapmlc/ | sed -n '/hostile inputs:/,/ total /p'

# A count, not a duration: go1.26's fuzz coordinator can report a spurious
# "context deadline exceeded" failure when a -fuzztime duration expires while a
# worker is mid-input (go.dev/issue/75804, fixed in go1.27). A count has no
# deadline to race, and it gives every target the same work on a slow machine.
fuzztime="${FUZZTIME:-4000x}"
for file in $(grep -rl --include='*_test.go' '^func Fuzz' .); do
	pkg="./$(dirname "${file#./}")"
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //'); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
