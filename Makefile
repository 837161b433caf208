# Thin targets; the logic lives in hack/.
GO ?= go

.PHONY: build test unit lint demo demo-down deps iso bench image

build:
	$(GO) build -o bin/ ./cmd/...

# The full suite: unit tests plus integration tests against a real libvirtd,
# qemu and the real clients. Needs root (network namespaces) and the host
# dependencies (hack/install-deps.sh); hack/test.sh prepares what it can.
test:
	bash hack/test.sh

# Pure-logic tests only, no libvirtd needed, under the race detector.
unit:
	$(GO) test -short -race ./...

# gofmt, go vet, then staticcheck (pinned; hack/staticcheck.sh builds it once per machine into the tool cache).
lint:
	bash hack/lint.sh

demo:
	bash hack/demo.sh

demo-down:
	bin/labctl down --profile tiny -f _out/demo/lab.yaml --netns labci

deps:
	bash hack/install-deps.sh

iso:
	bash hack/build-marker-iso.sh testdata/iso/marker.iso
	bash hack/build-marker-efi.sh testdata/iso/marker.efi

bench:
	bash hack/bench.sh

# vbmcd's OCI image, without a container daemon, reproducible (docs/metal3.md).
image:
	bash hack/image.sh
