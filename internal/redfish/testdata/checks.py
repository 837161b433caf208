"""What the sushy scripts here share: check, which prints ok or FAIL for
one value read and stops the script at the first FAIL."""
import sys


def check(what, got, want):
    if got != want:
        print(f"FAIL {what}: got {got!r}, want {want!r}")
        sys.exit(1)
    print(f"ok {what}")
