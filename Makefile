# ingot: `make help` lists the targets.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go
export CGO_ENABLED ?= 0
# Every Go package that has fuzz targets; each runs FUZZTIME in `make test`.
FUZZTIME ?= 5s
LONGFUZZ ?= 10m
LABDIR ?= /var/lib/ingot-lab
# LAB_STORE=etcd runs the lab's ingot on a one-member etcd inside the lab's
# namespace (default: the embedded bbolt file).
LAB_STORE ?=
# make deb: the packages are dated by the commit, so one commit gives the same bytes
# (from a checkout or from its source tarball: -buildvcs=false; the version is in -X main.version).
DEB_OUT ?= dist
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The integration and e2e tiers build only the packages that hold such
# tests (a test function named ...Integration... or ...E2E...): building
# every package's test binary under each tag cost minutes of make test.
tier_pkgs = $(shell grep -rlE '^func Test\w*$(1)' --include='*_test.go' cmd pkg | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
INTEGRATION_PKGS = $(call tier_pkgs,Integration)
E2E_PKGS = $(call tier_pkgs,E2E)

.PHONY: help build build-arm64 deb deps test test-unit test-integration test-e2e test-e2e-long fuzz fuzz-short lint bench lab lab-bench lab-down clean

help: ## list the targets
	@grep -hE '^[a-z][a-zA-Z0-9_-]*:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  \033[36m%-17s\033[0m %s\n", $$1, $$2}'

build: ## build the static binaries into bin/
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ingot ./cmd/ingot
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ingot-agent ./cmd/ingot-agent

build-arm64: ## ingot-agent for arm64 lab VMs (bin/ingot-agent-arm64; lab --vms arm64, test-e2e-long)
	GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ingot-agent-arm64 ./cmd/ingot-agent

deb: build ## Debian packages dist/ingot_VERSION_{amd64,arm64}.deb (DEB_OUT; arm64 cross-built), reproducible: same commit, same bytes
	@export GOFLAGS=-buildvcs=false; for arch in amd64 arm64; do \
	  GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o build/deb/$$arch/ingot ./cmd/ingot && \
	  GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o build/deb/$$arch/ingot-agent ./cmd/ingot-agent && \
	  SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) GOMODCACHE=$$($(GO) env GOMODCACHE) GOROOT=$$($(GO) env GOROOT) \
	    $(GO) run ./cmd/mkdeb --arch $$arch --bin build/deb/$$arch --host-ingot bin/ingot \
	    --describe $(VERSION) --commit $(COMMIT) --out $(DEB_OUT) || exit 1; \
	done

deps: ## install the Debian packages tests, lab and benchmarks use (root; apt-get)
	@.ci/deps

lint: build ## gofmt, go vet (every tier) and the shipped recipes
	@out=$$(gofmt -l cmd pkg); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration,e2e,e2e_long ./...
	./bin/ingot recipe lint $(if $(CI),--format github,) recipes/

test: deps lint test-unit test-integration fuzz-short test-e2e ## every test tier (root for the namespace and VM tiers)

test-unit: ## unit tier, with the race detector
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

test-integration: build ## namespace tier: real sockets and real clients in network namespaces (root)
	INGOT_BIN=$(CURDIR)/bin/ingot $(GO) test -tags integration -count=1 -p 1 -run 'Integration' -timeout 20m $(INTEGRATION_PKGS)

test-e2e: build ## QEMU tier: real VMs network-boot (root; TCG)
	INGOT_BIN=$(CURDIR)/bin/ingot INGOT_AGENT_BIN=$(CURDIR)/bin/ingot-agent $(GO) test -tags e2e -count=1 -p 1 -run 'E2E' -timeout 40m $(E2E_PKGS)

test-e2e-long: deps build build-arm64 ## long QEMU cases, not in `make test`: UEFI HTTP boot beside the site's DHCP; an arm64 VM (AAVMF, TCG) HTTP-boots its agent UKI; debian-12-nvidia built from its lock (DKMS, CUDA samples; cached after the first build) boots and fails first boot without a GPU (root)
	INGOT_BIN=$(CURDIR)/bin/ingot INGOT_AGENT_BIN=$(CURDIR)/bin/ingot-agent INGOT_AGENT_BIN_ARM64=$(CURDIR)/bin/ingot-agent-arm64 $(GO) test -tags e2e,e2e_long -count=1 -p 1 -run 'UEFIHTTPProxy|E2ELabARM64|E2ENvidiaImage' -timeout 180m -v ./pkg/lab/ ./pkg/image/

fuzz-short: ## every fuzz target for FUZZTIME (default 5s)
	@.ci/fuzz $(FUZZTIME)

fuzz: ## every fuzz target for LONGFUZZ (default 10m)
	@.ci/fuzz $(LONGFUZZ)

bench: build ## benchmarks side by side with peers (dnsmasq, kea, tftpd-hpa, nginx, dd); ratios printed
	INGOT_BIN=$(CURDIR)/bin/ingot $(GO) test -tags integration -run '^$$' -bench . -benchtime 1x -count 1 -p 1 -timeout 60m ./...

lab: deps build ## network-boot QEMU VMs in a namespace, provision them, reimage one (root)
	./bin/ingot lab up --dir $(LABDIR) $(if $(LAB_STORE),--store $(LAB_STORE))

lab-bench: deps build ## time to restore through the BMC (kexec and reboot hand-offs) and warm, with a simulated 30 s POST; ratios to reboot (root)
	./bin/ingot lab up --dir $(LABDIR)-bench --simulate-post 30s; rc=$$?; ./bin/ingot lab down --dir $(LABDIR)-bench; exit $$rc

lab-down: ## remove everything the lab made
	./bin/ingot lab down --dir $(LABDIR)

clean: ## remove build outputs
	rm -rf bin build dist
