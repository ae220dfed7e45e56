#!/usr/bin/env bash
# Regenerates the Go messages and gRPC stubs in pb/ from the repository's proto/ files.
#
#   ./generate.sh           write them
#   ./generate.sh --check   exit 1 if the committed ones differ from proto/
#
# Needs protoc and the two plugins (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
# google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2). The generated code is committed, so
# using the module needs neither.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../proto"
module="$(cd "$here" && go list -m)"
out="$here/pb"
if [[ "${1:-}" == "--check" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
export PATH="$PATH:$(go env GOPATH)/bin"
maps=()
for f in beacon registry sequence assign tasks configs; do
  maps+=("M$f.proto=$module/pb/${f}pb")
done
opts() { local IFS=,; echo "${maps[*]}"; }
mkdir -p "$out"
protoc -I"$proto" \
  --go_out="$out" --go_opt=paths=import --go_opt="module=$module/pb" --go_opt="$(opts)" \
  --go-grpc_out="$out" --go-grpc_opt=paths=import --go-grpc_opt="module=$module/pb" --go-grpc_opt="$(opts)" \
  "$proto"/*.proto
if [[ "${1:-}" == "--check" ]]; then
  if ! diff -r "$out" "$here/pb" >/dev/null; then
    echo "clients/go/pb differs from proto/: run clients/go/generate.sh" >&2
    diff -r "$out" "$here/pb" | head -20 >&2
    exit 1
  fi
fi
