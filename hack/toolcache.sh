# Sourced by the scripts that build tools from Go modules (build-kube.sh,
# build-coredns.sh, staticcheck.sh): a cache of built tools outside the
# clone, one directory per tool and version, so that a fresh clone on the
# same machine (a second CI run) builds nothing.
#
#   ${BMLAB_TOOLS_CACHE:-/var/cache/bmlab/tools}/<tool>-<version>/<binaries>
#
# A tool built from a tools module under hack/tools/ has the module's hash
# in its version (<tool>-<version>-<modhash>).
#
# A directory is complete or absent: a build goes into a temporary
# directory beside it and is renamed into place when it succeeded. Builds
# of one tool are serialized by a lock file, so two runs at once build it
# once. Every binary of a cached directory is linked into _out/tools/,
# where the tests look for it.

TOOLS_CACHE=${BMLAB_TOOLS_CACHE:-/var/cache/bmlab/tools}

# tool_cached NAME VERSION BUILD_FUNCTION: makes sure the cache holds
# NAME-VERSION, calling BUILD_FUNCTION DIR (with a temporary DIR to fill)
# when it does not, then links what it holds into _out/tools/.
tool_cached() {
  local name=$1 version=$2 build=$3
  local dir=$TOOLS_CACHE/$name-$version
  mkdir -p "$TOOLS_CACHE" _out/tools
  if [ ! -d "$dir" ]; then
    (
      flock 9
      if [ ! -d "$dir" ]; then
        local tmp
        tmp=$(mktemp -d "$TOOLS_CACHE/.$name-$version.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        echo "building $name $version into $dir (once per machine)"
        local start=$SECONDS
        "$build" "$tmp"
        chmod 755 "$tmp"
        mv -T "$tmp" "$dir"
        trap - EXIT
        echo "built $name $version in $((SECONDS - start)) s"
      fi
    ) 9>"$TOOLS_CACHE/.$name.lock"
  fi
  local f
  for f in "$dir"/*; do
    ln -sfn "$f" "_out/tools/$(basename "$f")"
  done
}

# modhash DIR: 8 hex digits of the hash of a tools module's go.mod, go.sum
# and Go files, for the cache key of what it builds (a changed replace
# line, sum or generator is another build, even at the same version).
modhash() {
  (cd "$1" && find . -name go.mod -o -name go.sum -o -name '*.go' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-8)
}

# go_build DIR MODULE_DIR LDFLAGS PACKAGE...: builds the packages of the
# tools module MODULE_DIR into DIR, statically, under nice (on CI the build
# shares 2 cores with whatever else runs).
go_build() {
  local dest=$1 mod=$2 ldflags=$3
  shift 3
  (cd "$mod" && GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$dest/" "$@")
}

# tool_go_install NAME VERSION PACKAGE: tool_cached NAME VERSION, built by
# `go install PACKAGE@VERSION` under nice.
tool_go_install() {
  local name=$1 version=$2 pkg=$3
  tool_cached "$name" "$version" _go_install
}

# _go_install DIR: tool_go_install's build (pkg and version are its caller's).
_go_install() {
  GOBIN="$1" GOFLAGS=-mod=mod nice -n 10 go install "$pkg@$version"
}
