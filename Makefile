# cargoship: the two commands a newcomer needs are `make demo` and `make test`.
# Both install what they need (apt packages, a virtualenv, the lab image) on a fresh machine.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      ?= .venv
PY        := $(VENV)/bin/python
HOSTS       ?= 3
CONTROLLERS ?= 1
ENGINE      ?= k3s
VERSION     ?=
PYTEST_ARGS ?=
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

APT_PACKAGES := openssh-client podman runc debootstrap iproute2 uidmap git python3-venv gcc libc6-dev

# The virtualenv's Python: the distribution's (/usr/bin/python3) when it is one ansible-core 2.19 runs on (3.11
# or newer), else the first python3 on PATH. Debian builds its Python with profile-guided and link-time
# optimisation into a static binary; pyenv builds without either by default (and, on this machine, with a shared
# libpython). Ansible's work on the control host (the playbook's parent, its forked workers, the cargoship
# command) costs about a tenth less CPU on Debian's 3.11.2 than on pyenv's 3.11.7: tests/bench/python_build.py
# and the lab figures in docs/performance.md. `make deps BASE_PYTHON=...` chooses another.
BASE_PYTHON ?= $(shell /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  && echo /usr/bin/python3 || echo python3)

.PHONY: help deps venv apt lab-up lab-down demo test unit lint sanity changelog compat dist collection clean docs molecule soak

help:
	@echo "make demo    - bring up local test hosts and run the main job on them"
	@echo "make test    - install what is needed and run the whole test suite"
	@echo "make soak [ROLLOUTS=20] [SEED=S] - the chaos soak: random changes and faults, invariants after each (not in make test)"
	@echo "make lab-up HOSTS=N [CONTROLLERS=M] [ENGINE=k3s|rke2] [VERSION=v1.30.2+k3s1]"
	@echo "make lab-down - remove every container, namespace, link and process of the lab"
	@echo "make lint    - ansible-lint (production profile), ruff, ansible-test sanity"
	@echo "make molecule - the molecule scenario (lab hosts, converge, idempotence, verify)"
	@echo "make docs    - write the phase and settings tables, role argument specs and role defaults (from the phase declarations and plugins/plugin_utils/_run_options.py)"
	@echo "make compat  - the unit tests on Python 3.13 with ansible-core 2.20"
	@echo "make dist    - the wheel (collection inside) and the source distribution, in dist/"
	@echo "make collection - the collection tarball (for ansible-galaxy, AWX), in dist/"

deps: apt venv

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if ! command -v kubectl >/dev/null; then missing="$$missing kubernetes-client"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(VENV)/.installed

# pip bootstraps uv, and uv installs the rest, compiling every module's bytecode as pip does, on both cores:
# 15 s against pip's 34 s on a fresh machine (measured 2026-12-06). The bytecode is needed: this machine and CI
# set PYTHONDONTWRITEBYTECODE, so a module not compiled at install is compiled again by every process that
# imports it (a replica without it took a sixth more CPU). The virtualenv keeps its pip: ansible-test sanity
# installs its requirements with it.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q 'uv>=0.5'
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -e '.[test]'
	touch $@

lab-up: deps
	$(PY) tests/lab/labctl.py up --hosts $(HOSTS) --controllers $(CONTROLLERS) --engine $(ENGINE) --version "$(VERSION)"

lab-down:
	@if [ -x $(PY) ]; then $(PY) tests/lab/labctl.py down --all; else python3 tests/lab/labctl.py down --all; fi

# The main job: three test hosts whose engine config drifted from examples/group_vars/all.yml,
# a dry run showing what would change, the real run, and a second dry run showing nothing to do.
demo: deps
	@trap '$(PY) tests/lab/labctl.py down' EXIT; set -e; \
	$(PY) tests/lab/labctl.py up --hosts 3 --engine $(ENGINE); \
	mkdir -p .lab/group_vars && cp examples/group_vars/all.yml .lab/group_vars/all.yml; \
	echo; echo "== 1. dry run: what would change (nothing is touched)"; \
	$(VENV)/bin/cargoship engine-config-sync -i .lab/inventory.yml --dry-run; \
	echo; echo "== 2. the real run"; \
	$(VENV)/bin/cargoship engine-config-sync -i .lab/inventory.yml --confirm; \
	echo; echo "== 3. dry run again: nothing to do (exit 0 with --detailed-exitcode)"; \
	$(VENV)/bin/cargoship engine-config-sync -i .lab/inventory.yml --dry-run --detailed-exitcode; \
	kubectl --kubeconfig .lab/kubeconfig get nodes

# molecule's own scenario: create (the lab), converge (the playbook), idempotence, verify (verify.yml), destroy.
molecule: venv
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/molecule test

docs: venv
	$(PY) -m cargoship_runner.docs

# The collection tarball alone (what ansible-galaxy installs, and the execution environment takes), into dist/.
collection: venv
	mkdir -p dist && $(VENV)/bin/ansible-galaxy collection build --force --output-path dist .

# The wheel (with the collection inside) and the source distribution, into dist/.
dist: venv
	rm -rf dist build && $(PY) -m build --outdir dist .

unit: venv
	$(VENV)/bin/pytest -q tests/unit $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check cargoship_runner plugins tests
	$(VENV)/bin/ansible-lint --profile production --offline
	$(MAKE) sanity
	$(MAKE) changelog

# The changelog fragments are linted, and the release notes they make are written in a copy of the tree
# (a release consumes the fragments; the checkout keeps them).
CHANGELOG_DIR := /tmp/cargoship-changelog/ansible_collections/cargoship/engine
changelog: venv
	$(VENV)/bin/antsibull-changelog lint
	rm -rf /tmp/cargoship-changelog && mkdir -p $(CHANGELOG_DIR)
	git ls-files -co --exclude-standard -z | grep -zv '^.collections/' | \
	  tar --null -T - -cf - | tar -C $(CHANGELOG_DIR) -xf -
	cd $(CHANGELOG_DIR) && PATH=$(CURDIR)/$(VENV)/bin:$$PATH antsibull-changelog release --version \
	  $$(sed -n 's/^version: *//p' galaxy.yml) --date $$(date -u +%F)
	@echo "release notes: $(CHANGELOG_DIR)/CHANGELOG.rst ($$(grep -c '^- ' $(CHANGELOG_DIR)/CHANGELOG.rst) entries)"

# ansible-test needs the collection at ansible_collections/cargoship/engine, in a tree of its own (it lists
# files with git): run it on a copy outside the checkout.
SANITY_DIR := /tmp/cargoship-sanity/ansible_collections/cargoship/engine
# ansible-test downloads a pip bootstrap script from a host this machine cannot reach; ours stands in.
PIP_BOOTSTRAP = $(HOME)/.ansible/test/cache/get_pip_$(subst .,_,$(shell $(PY) -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; from ansible_test._internal.host_configs import NativePythonConfig as N; print(g(N(version="3.11", path="python3"))["pip"])')).py
sanity: venv
	mkdir -p $(dir $(PIP_BOOTSTRAP)) && cp tests/tools/pip_bootstrap.py $(PIP_BOOTSTRAP)
	rm -rf /tmp/cargoship-sanity && mkdir -p $(SANITY_DIR)
	git ls-files -co --exclude-standard -z | grep -zv '^.collections/' | \
	  tar --null -T - -cf - | tar -C $(SANITY_DIR) -xf -
	cd $(SANITY_DIR) && git init -q && git add -A && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH ansible-test sanity --python 3.11 --color no --requirements

# The newest supported Python with the newer ansible-core: the unit tests in a virtualenv (the main virtualenv
# is the oldest, Python 3.11 with ansible-core 2.19; Python 3.12 with ansible-core 2.20 runs a real rollout on
# lab hosts from the installed wheel in tests/integration/test_ansible_world.py). `make compat
# COMPAT_PYTHONS="3.12 3.13"` adds others. The machine's pyenv provides them; one missing is an error, not a skip.
# Compiled at install for the reason the main virtualenv is (PYTHONDONTWRITEBYTECODE): 47 s of CPU against 61 s.
COMPAT_PYTHONS ?= 3.13
COMPAT_CORE    ?= ansible-core>=2.20,<2.21
compat: venv
	@set -e; for v in $(COMPAT_PYTHONS); do \
	  py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -1); \
	  if [ -z "$$py" ] && python$$v -c pass 2>/dev/null; then py=$$(command -v python$$v); fi; \
	  if [ -z "$$py" ]; then echo "no Python $$v on this machine (PATH or pyenv)"; exit 1; fi; \
	  env=.cache/compat-$$v; \
	  test -x $$env/bin/python || $(VENV)/bin/uv venv -q --python $$py $$env; \
	  $(VENV)/bin/uv pip install -q --compile-bytecode --python $$env/bin/python -e . '$(COMPAT_CORE)' pytest jsonschema ansible-builder; \
	  echo "== Python $$v, ansible-core $$($$env/bin/python -c "import ansible.release as r; print(r.__version__)")"; \
	  PATH=$(CURDIR)/$$env/bin:$$PATH $$env/bin/python -m pytest -q -p no:cacheprovider tests/unit; \
	done

# Each step's wall time and the machine's CPU meanwhile (every core's busy time, from /proc/stat, in clock
# ticks) go to .cache/test-steps.tsv and every test's figures to .cache/test-ledger.jsonl;
# tests/tools/suite_time.py prints where the time went (docs/testing.md holds the last full run's).
STEPS  := .cache/test-steps.tsv
LEDGER := $(CURDIR)/.cache/test-ledger.jsonl
busy  = $$(awk '/^cpu /{print $$2+$$3+$$4+$$7+$$8+$$9}' /proc/stat)
timed = start=$$(date +%s); ticks=$(busy); $(2); rc=$$?; \
	printf '%s\t%s\t%s\n' '$(1)' $$(( $$(date +%s) - start )) $$(( $(busy) - ticks )) >> $(STEPS); exit $$rc
# pytest's parallel workers, each with a lab of its own (tests/lab/labctl.py slots 0 to N-1); the
# molecule scenario runs beside them, in a slot of its own.
TEST_WORKERS  ?= 3
MOLECULE_SLOT ?= 9

test:
	@mkdir -p .cache && rm -f $(STEPS) $(LEDGER) $(LEDGER).runs
	@$(call timed,make deps,$(MAKE) --no-print-directory deps)
	@$(call timed,$(AT_ONCE),$(MAKE) -j2 --no-print-directory test-checks-logged test-pytest)
	@$(PY) tests/tools/suite_time.py --ledger $(LEDGER) --steps $(STEPS) || true

# The checks that need no lab of pytest's run beside pytest: the unit tests of the other Pythons mostly
# wait (an API double's retries), and pytest's labs leave a core idle a quarter of the time. Their output
# is kept apart and printed whole when they end, so that pytest's streams on.
CHECKS_LOG := .cache/test-checks.log
# Step names: a step run inside another is named by its path.
AT_ONCE := checks and pytest (at once)
CHECKS  := $(AT_ONCE) > lint + compat + molecule (at once)
.PHONY: test-checks-logged test-pytest test-checks timed-lint timed-compat timed-molecule
test-checks-logged:
	@$(call timed,$(CHECKS),$(MAKE) -j3 --output-sync=target --no-print-directory test-checks > $(CHECKS_LOG) 2>&1; rc=$$?; cat $(CHECKS_LOG); (exit $$rc))
test-pytest:
	@$(call timed,$(AT_ONCE) > pytest -n $(TEST_WORKERS),CARGOSHIP_TEST_LEDGER=$(LEDGER) $(VENV)/bin/pytest tests -n $(TEST_WORKERS) --dist loadfile --durations=20 $(PYTEST_ARGS))

# The checks that need no lab of pytest's, each timed on its own. The lint is CPU alone, with no timing in it:
# at the lowest priority it takes only the cores pytest's labs leave idle instead of slowing their tests.
test-checks: timed-lint timed-compat timed-molecule
timed-lint:
	@$(call timed,$(CHECKS) > make lint,nice -n 19 $(MAKE) --no-print-directory lint)
timed-compat:
	@$(call timed,$(CHECKS) > make compat,$(MAKE) --no-print-directory compat)
timed-molecule:
	@$(call timed,$(CHECKS) > make molecule,CARGOSHIP_LAB_SLOT=$(MOLECULE_SLOT) $(MAKE) --no-print-directory molecule)

soak: deps
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) tests/soak/soak.py --rollouts $(or $(ROLLOUTS),20) $(if $(SEED),--seed $(SEED),)

clean: lab-down
	rm -rf $(VENV) .cache
