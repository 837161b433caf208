#!/usr/bin/env bash
# make lint: gofmt (every Go file formatted), go vet, then staticcheck (pinned; hack/staticcheck.sh builds it
# once per machine into the tool cache, hack/toolcache.sh). make test runs it
# too.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_out/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
bash hack/staticcheck.sh
