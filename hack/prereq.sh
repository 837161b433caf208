# Sourced by the scripts that make lab objects as root (demo.sh, test.sh).

# need_root_and_go MESSAGE: stops with MESSAGE unless run as root, then
# makes sure Go is on PATH (sudo's secure_path leaves out go.dev's install
# location) or stops saying where to get it.
need_root_and_go() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1" >&2
    exit 1
  fi
  [ -x /usr/local/go/bin/go ] && export PATH=$PATH:/usr/local/go/bin
  command -v go >/dev/null || { echo "Go is not on PATH: install Go 1.26 (https://go.dev/dl) and retry" >&2; exit 1; }
}
