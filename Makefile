# agentplane — see README.md. `make run` starts the platform locally, `make test` tests it.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
OAPI_CODEGEN := $(BIN)/oapi-codegen
# The test control plane (kube-apiserver + etcd), built from Go modules by hack/build-controlplane.sh.
K8S_ASSETS := $(BIN)/k8s
export KUBEBUILDER_ASSETS := $(K8S_ASSETS)
# Every Go command make runs builds with -trimpath, as make build and the tests' own builds of
# agentplane do: the test binaries, go vet and those builds then share their compiled packages
# (without it a fresh machine compiled the whole dependency graph twice, once for each).
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
STATE_DIR ?= .agentplane
DEV_ARGS ?=
TEST_TIMEOUT ?= 45m
GO_TEST_FLAGS ?=

.PHONY: all
all: build

##@ Development

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-22s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

$(CONTROLLER_GEN): hack/tools/codegen/go.mod hack/tools/codegen/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/codegen && $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers (each CRD serves v1alpha1 and v1beta1, stores v1beta1).
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(GO) run ./hack/crdversions config/crd/bases

.PHONY: docs
docs: ## Generate the REST API docs: docs/openapi.json (embedded, GET /openapi.json) and README's route table.
	$(GO) run ./hack/gendocs

$(OAPI_CODEGEN): hack/tools/oapi-codegen/go.mod hack/tools/oapi-codegen/go.sum
	@mkdir -p $(BIN)
	cd hack/tools/oapi-codegen && $(GO) build -o $(OAPI_CODEGEN) github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen

.PHONY: client
client: $(OAPI_CODEGEN) ## Generate the Go client pkg/client from docs/openapi.json (run after make docs).
	$(OAPI_CODEGEN) -config pkg/client/oapi-codegen.yaml docs/openapi.json

.PHONY: chart
chart: ## Generate the Helm chart dist/chart from config/ (hack/genchart; needs kubectl).
	$(GO) run ./hack/genchart

.PHONY: helm
helm: ## Build helm from its Go module (hack/tools/helm) into the user cache, linked as bin/helm.
	@mkdir -p $(BIN)
	ln -sf "$$(hack/build-helm.sh)" $(BIN)/helm

.PHONY: clean-caches
clean-caches: ## Remove every cache make run and make test keep outside the clone (CLEAN_FLAGS=--packages also purges the Debian packages they install; root): the next run is cold.
	hack/clean-caches.sh $(CLEAN_FLAGS)

.PHONY: verify-generated
verify-generated: ## Fail when generated files are stale.
	hack/verify-generated.sh

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

# Modules of their own that ./... does not reach (make vet and make test run them explicitly).
EXAMPLE_MODULES := examples/envtest-consumer

.PHONY: lint
lint: ## The kept linter set (.golangci.yml), golangci-lint built from its Go module (hack/tools/golangci-lint) into the user cache: 0 findings.
	"$$(hack/build-golangci-lint.sh)" run ./...

.PHONY: vet
vet: ## go vet (also of the shipped build, -tags nodevtools) and a gofmt check.
	$(GO) vet ./...
	$(GO) vet -tags nodevtools ./cmd/...
	@for m in $(EXAMPLE_MODULES); do (cd $$m && $(GO) vet ./...); done
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd from source into bin/k8s (once).
	hack/build-controlplane.sh $(K8S_ASSETS)

.PHONY: cluster-binaries
cluster-binaries: kube-binaries kube-router gvisor ## Build kubelet, kube-controller-manager, kube-scheduler, kube-proxy, pause, kube-router, the kwok controller and gVisor into bin/k8s (once).

.PHONY: kube-binaries
kube-binaries: ## Build the node's Kubernetes binaries and the kwok controller into bin/k8s (once; after envtest-assets, whose compiled packages they reuse).
	hack/build-cluster.sh $(K8S_ASSETS)
	hack/build-kwok.sh $(K8S_ASSETS)

.PHONY: kube-router
kube-router: ## Build kube-router from its Go module into bin/k8s (once): the local cluster's network policy firewall.
	hack/build-kube-router.sh $(K8S_ASSETS)

.PHONY: gvisor
gvisor: ## Build gVisor's runsc and containerd-shim-runsc-v1 from their Go module into bin/k8s (once): the local cluster's RuntimeClass gvisor.
	hack/build-gvisor.sh $(K8S_ASSETS)

.PHONY: criu
criu: ## Build CRIU 4.1.1 from Debian's source tarball with hack/criu/patches into bin/criu (once): checkpoint/restore of local gateways.
	hack/build-criu.sh bin

.PHONY: node-packages
node-packages: ## Install containerd, runc, the CNI plugins, iptables, ipset and tini from Debian when absent (root).
	@hack/install-node-packages.sh

.PHONY: sandbox-packages
sandbox-packages: ## Install bubblewrap, tini and CRIU's build dependencies from Debian when absent and build CRIU into bin/criu: the local runtime's agent sandbox and checkpointed suspend (root).
	@hack/install-sandbox.sh

.PHONY: chromium
chromium: ## Install Debian's chromium when absent, for the web console's browser tests (root).
	@hack/install-chromium.sh

.PHONY: promtool
promtool: ## Build Prometheus's promtool from its Go module (hack/tools/promtool) into the user cache, linked as bin/promtool.
	@mkdir -p $(BIN)
	ln -sf "$$(hack/build-promtool.sh)" $(BIN)/promtool

.PHONY: engine
engine: ## Install the pinned OpenClaw engine, the release before it (real-node upgrade test) and Node into the user cache (once).
	@hack/install-engine.sh >/dev/null
	@hack/install-engine.sh --previous >/dev/null

##@ Build

.PHONY: build
build: ## Build bin/agentplane and bin/agentplane-probe (the gateway image's static health probe), both static and reproducible (-trimpath: the same source gives the same bytes in any checkout, so images keyed by them are built once).
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/agentplane ./cmd/agentplane
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/agentplane-probe ./cmd/agentplane-probe

.PHONY: run
run: build envtest-assets engine sandbox-packages ## Run the platform locally (agentplane dev).
	$(BIN)/agentplane dev --state-dir $(STATE_DIR) --control-plane-dir $(K8S_ASSETS) --engine-dir "$$(hack/install-engine.sh --print-dir)" $(DEV_ARGS)

.PHONY: cluster
cluster: build envtest-assets cluster-binaries node-packages engine ## Run the platform on a local cluster with a real node (kubelet, containerd, the real gateway image; root).
	$(BIN)/agentplane dev --runtime kube --state-dir $(STATE_DIR)-kube --control-plane-dir $(K8S_ASSETS) --engine-dir "$$(hack/install-engine.sh --print-dir)" $(DEV_ARGS)

.PHONY: cluster-up
cluster-up: build envtest-assets cluster-binaries node-packages engine ## The local cluster with the manager's image imported but no manager running (then make deploy-local; root).
	$(BIN)/agentplane dev --runtime kube --no-manager --state-dir $(STATE_DIR)-kube --control-plane-dir $(K8S_ASSETS) --engine-dir "$$(hack/install-engine.sh --print-dir)" $(DEV_ARGS)

##@ Deploy

IMG ?= ghcr.io/agentplane/agentplane:latest
KUBECTL ?= kubectl

.PHONY: docker-build
docker-build: ## Build the manager image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: deploy
deploy: ## Install CRDs, RBAC and the manager into the cluster of the current kubeconfig.
	$(KUBECTL) kustomize config/default | sed 's|ghcr.io/agentplane/agentplane:latest|$(IMG)|' | $(KUBECTL) apply --server-side -f -

.PHONY: deploy-local
deploy-local: ## Deploy the manager into the local cluster of make cluster-up (config/local; KUBECONFIG as it prints).
	$(KUBECTL) kustomize config/local | $(KUBECTL) apply --server-side -f -
	$(KUBECTL) -n agentplane-system get secret agentplane-secrets-key >/dev/null 2>&1 || \
		$(KUBECTL) -n agentplane-system create secret generic agentplane-secrets-key --from-literal=key="$$(head -c 24 /dev/urandom | base64)"
	$(KUBECTL) -n agentplane-system rollout status deployment/agentplane-controller-manager --timeout=3m
	@echo "REST facade: http://$$($(KUBECTL) -n agentplane-system get svc agentplane-api -o jsonpath='{.spec.clusterIP}')"
	@echo "a token: KUBECONFIG=$$KUBECONFIG $(BIN)/agentplane token create --workspace demo --create-workspace --user me --scopes agents:read,agents:write"

.PHONY: undeploy
undeploy: ## Remove what deploy installed (CRDs included: this deletes every agentplane object).
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Test

.PHONY: test-prereqs
test-prereqs: ## What make test needs first, in two lanes side by side (hack/test-prereqs.sh): the control plane's build beside the downloads, packages and other builds.
	@hack/test-prereqs.sh "$(MAKE)"

.PHONY: test
test: test-prereqs ## Every tier, in two lanes (hack/test-all.sh): the packages that boot gateways or a node one at a time, the checks (verify-generated, vet, lint) and the rest beside them.
	$(TEST_ENV) $(ENGINE_ENV) GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) GO_TEST_FLAGS="$(TEST_LDFLAGS) $(GO_TEST_FLAGS)" EXAMPLE_MODULES="$(EXAMPLE_MODULES)" hack/test-all.sh "$(MAKE)"

# The test tiers (hack/testtiers: a package's tier is the heaviest thing its tests start). make
# test runs all of them at once; these run one, for a quicker answer while working.
TIER_PKGS = $$($(GO) run ./hack/testtiers $(1))
# Every Go build of the tests is static, as the binaries the e2e tests build for images and
# sandboxes are (goBuildStatic, make build), so the tests, their builds and each tier share one
# compiled graph: a package's compiled form depends on CGO_ENABLED through net and os/user,
# which nearly everything imports, and with cgo on for the test binaries a fresh machine
# compiled the whole graph twice (and go-ethereum's C secp256k1). Nothing of the module uses cgo.
TEST_ENV := CGO_ENABLED=0
# Test binaries are linked without DWARF (-w): no debugger reads them, and linking is most of a
# tier that starts nothing (make test-unit links 45 test binaries; DWARF was about a fifth of
# it). A debugging session passes its own: make test-unit TEST_LDFLAGS=.
TEST_LDFLAGS ?= -ldflags=-w
ENGINE_ENV = AGENTPLANE_ENGINE_DIR="$$(hack/install-engine.sh --print-dir)" AGENTPLANE_PREVIOUS_ENGINE_DIR="$$(hack/install-engine.sh --previous --print-dir)"

.PHONY: test-unit
test-unit: ## Tier 1: the tests that start nothing but run in the test's process (fake clients, table tests).
	$(TEST_ENV) $(GO) test $(TEST_LDFLAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(call TIER_PKGS,unit)

.PHONY: test-tools
test-tools: helm ## Tier 1b: the tests that run programs of this machine (the engine double, node and npm for the CID vectors, the S3 test server, helm).
	$(TEST_ENV) $(GO) test $(TEST_LDFLAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(call TIER_PKGS,tools)

.PHONY: test-envtest
test-envtest: envtest-assets chromium promtool ## Tier 2: the suites against a real kube-apiserver and etcd (envtest).
	$(TEST_ENV) $(GO) test $(TEST_LDFLAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(call TIER_PKGS,envtest)

.PHONY: test-engine
test-engine: envtest-assets sandbox-packages engine ## Tier 3: the tests with the real OpenClaw engine (local runtime, sandbox, CRIU; root for some).
	$(TEST_ENV) $(ENGINE_ENV) $(GO) test $(TEST_LDFLAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(call TIER_PKGS,engine)

.PHONY: test-node
test-node: envtest-assets cluster-binaries node-packages engine helm ## Tier 4: the real-node tests (containerd, the kubelet; root).
	$(TEST_ENV) $(ENGINE_ENV) $(GO) test $(TEST_LDFLAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $(call TIER_PKGS,node)

STRESS_TIMEOUT ?= 10m

.PHONY: test-stress
test-stress: envtest-assets ## Only the stress, fault and security tests (test/stress), verbose; `make test` runs them too.
	$(TEST_ENV) $(GO) test $(TEST_LDFLAGS) -count=1 -v -timeout $(STRESS_TIMEOUT) $(GO_TEST_FLAGS) ./test/stress/

.PHONY: test-robustness
test-robustness: envtest-assets ## Long profile of the linearizability history test: the fixed seeds and 10 random ones, 60 s of traffic each (about 20 min).
	AGENTPLANE_HISTORY_RUNS=$${AGENTPLANE_HISTORY_RUNS:-10} AGENTPLANE_HISTORY_DURATION=$${AGENTPLANE_HISTORY_DURATION:-60s} \
		$(TEST_ENV) $(GO) test $(TEST_LDFLAGS) -count=1 -v -timeout 60m $(GO_TEST_FLAGS) -run 'TestHistoryIsLinearizable' ./test/stress/

##@ Benchmarks

BENCH_FLAGS ?=

.PHONY: bench
bench: envtest-assets cluster-binaries node-packages sandbox-packages engine ## Every benchmark, then docs/BENCHMARKS.md's tables from their results (BENCH_FLAGS=-only NAME,...; -list names them; root for the cluster ones).
	AGENTPLANE_ENGINE_DIR="$$(hack/install-engine.sh --print-dir)" $(GO) run ./hack/bench/report $(BENCH_FLAGS)

BENCH_LOAD_FLAGS ?= -rate 50 -duration 60s -repeats 3

.PHONY: bench-load
bench-load: envtest-assets ## Mixed REST load at a fixed rate against `agentplane dev` (fake engine): latency, errors, RSS.
	$(GO) run ./hack/bench/load $(BENCH_LOAD_FLAGS)
