#!/usr/bin/env bash
# Checks the deployment files (run by `make deploy-check`, which `make test` runs):
#   hadolint on the Dockerfile, failing on any finding;
#   the compose file against the Compose Specification schema;
#   `systemd-analyze verify` on each unit, with ExecStart pointed at a real bookworm binary;
#   `systemd-analyze security` exposure at most 2.0 for each service unit.
# Usage: Deploy/check.sh VENV BOOKWORM_BINARY
set -euo pipefail
venv="$1"
binary="$(realpath "$2")"
here="$(cd "$(dirname "$0")" && pwd)"

# style is the lowest severity: info and style findings (DL3066, say) fail as errors do.
"$venv/bin/hadolint" --failure-threshold style "$here/Dockerfile"
echo "hadolint: Deploy/Dockerfile has no findings"

"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$here/compose.yaml"

units="$(mktemp -d)"
trap 'rm -rf "$units"' EXIT
for unit in "$here"/systemd/*.service; do
    sed "s|/opt/bookworm/bookworm|$binary|g" "$unit" > "$units/$(basename "$unit")"
done
# verify only warns (exit 0) about unknown keys and the like: any message at all is a failure.
findings="$(cd "$units" && systemd-analyze verify ./*.service 2>&1)" || { echo "$findings"; exit 1; }
if [ -n "$findings" ]; then echo "$findings"; exit 1; fi
echo "systemd-analyze verify: every unit is valid, no warnings"
for unit in "$units"/*.service; do
    name="$(basename "$unit")"
    # --threshold is exposure x 10: 20 means 2.0.
    exposure="$(cd "$units" && systemd-analyze security --offline=true --threshold=20 "$name" 2>&1 | tail -1)"
    echo "$name: ${exposure#→ }"
done
