#!/usr/bin/env bash
# make lint: go vet, then staticcheck (pinned; hack/staticcheck.sh builds it
# once per machine into the tool cache, hack/toolcache.sh). make test runs it
# too.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
go vet ./...
bash hack/staticcheck.sh
