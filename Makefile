# The Makefile only delegates to hack/ scripts (see hack/README.md).
SHELL := /usr/bin/env bash
VERSION ?= v1.37.2-crivk.0
NODE_AGENT ?= crivk

.PHONY: all build run test test-unit test-walkthrough test-conformance test-e2e test-long test-containerd-system test-helm parity conformance storage-conformance node-conformance bench chaos release bench-fleet update-features local-up local-down deps clean

all: build

## build: compile crivk into _output/bin/crivk
build:
	VERSION=$(VERSION) hack/build.sh

## run: install deps, build, bring up the local control plane + containerd, run crivk as node crivk-local (Ctrl-C stops everything; the cluster's etcd data, with its pods, is kept for the next run)
run:
	VERSION=$(VERSION) hack/run.sh

## test: unit tests (go test -race), chart checks, the README's walkthrough, the quick conformance subsets, end-to-end tests against a local cluster brought up and torn down here, then the chart beside a real kubelet; the cluster tiers start from a state of their own (not make run's), count their specs and accept only the skips of hack/allowed-skips.txt
test:
	VERSION=$(VERSION) hack/test.sh

## test-unit: unit tests only (no root, no cluster)
test-unit:
	hack/test.sh unit

## test-walkthrough: the README's quick start as a user runs it: make run, kubectl run bb, kubectl logs bb says hello, Ctrl-C (hack/walkthrough.sh)
test-walkthrough:
	VERSION=$(VERSION) hack/test.sh walkthrough

## test-conformance: the quick conformance subset (hack/conformance-quick.txt) against crivk only
test-conformance:
	VERSION=$(VERSION) hack/test.sh conformance

## test-e2e: end-to-end tests only
test-e2e:
	VERSION=$(VERSION) hack/test.sh e2e

## test-long: the end-to-end tests of hack/e2e-long.txt, which make test leaves out because each waits on a clock it cannot shorten (TestVolumeTokenRefresh: 8 minutes; about 11 with the cluster)
test-long:
	VERSION=$(VERSION) hack/test.sh long

## test-containerd-system: the containerd 1.6 lane: the quick conformance subset and the e2e tests of hack/e2e-containerd-system.txt on Debian's containerd 1.6 (CONTAINERD=system); make test runs on containerd 2
test-containerd-system:
	VERSION=$(VERSION) hack/test.sh containerd-system

## test-helm: charts/crivk installed beside a real kubelet node (hack/helm-e2e.sh; the last stage of make test)
test-helm:
	VERSION=$(VERSION) hack/test.sh helm

## parity: the comparisons with the kubelet (TestFieldsKubelet, TestEvictionMemoryKubelet, TestEvictionDiskPressureKubelet, each beside crivk's run) through hack/test.sh e2e; writes docs/parity.md with the date (hack/parity.sh; about 12 minutes)
parity:
	VERSION=$(VERSION) hack/parity.sh

## conformance: upstream node conformance specs against NODE_AGENT=crivk|kubelet (CONFORMANCE_FOCUS/CONFORMANCE_SKIP override)
conformance:
	NODE_AGENT=$(NODE_AGENT) hack/conformance.sh

## storage-conformance: upstream [sig-storage] specs of e2e.test's in-tree drivers STORAGE_DRIVERS (default local|emptydir|hostPath|hostPathSymlink; local's directory types only) against NODE_AGENT=crivk|kubelet, not Serial, Slow, Disruptive or a feature's, through hack/conformance.sh (docs/conformance.md "sig-storage"; the local driver cannot run on these machines); with the node e2e images (nginx) the emptydir exec spec needs
STORAGE_DRIVERS ?= local|emptydir|hostPath|hostPathSymlink
storage-conformance:
	NODE_E2E_IMAGES=1 NODE_AGENT=$(NODE_AGENT) CONFORMANCE_FOCUS='\[sig-storage\].*\[Driver: ($(STORAGE_DRIVERS))\]' CONFORMANCE_SKIP='\[Disruptive\]|\[Serial\]|\[Slow\]|\[Feature:|LocalVolumeType: block' hack/conformance.sh

## node-conformance: the node e2e suite (test/e2e_node, e2e_node.test) against NODE_AGENT=crivk|kubelet (NODE_CONFORMANCE_SELECTION=1|2, docs/conformance.md)
node-conformance:
	NODE_AGENT=$(NODE_AGENT) hack/node-conformance.sh

## bench: crivk against the kubelet and raw CRI calls (docs/benchmarks.md); BENCH_QUICK=1 for the < 5 minute plan
bench:
	VERSION=$(VERSION) hack/bench.sh

## bench-fleet: crivk nodes (one process) against the kubelet's hollow nodes (kubemark), both over the kubelet's fake CRI, at 10/50/100 nodes (docs/benchmarks-fleet.md); BENCH_FLEET_NODES=10 for a smoke run
bench-fleet:
	VERSION=$(VERSION) hack/bench-fleet.sh

## chaos: the fault scenarios (containerd, API server and crivk killed; 10 kill -9 cycles of crivk during a 30-pod churn) against a local cluster
chaos:
	VERSION=$(VERSION) hack/chaos.sh

## release: the release artifacts of VERSION in _output/release/ (static binary, image as an OCI tarball with its digest, packaged chart, SHA256SUMS), checked by hack/verify-release.sh
release:
	VERSION=$(VERSION) hack/release.sh

## update-features: regenerate kubeletconfig/zz_generated_features.go, the kubelet's feature gates, from hack/tools' k8s.io/kubernetes (commit the result)
update-features:
	hack/update-features.sh

deps:
	hack/install-deps.sh

local-up:
	hack/local-up.sh

local-down:
	hack/local-down.sh

clean:
	CLEAN=1 hack/local-down.sh
	rm -rf _output
