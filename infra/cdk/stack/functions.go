package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TracesSampler keeps a caller's decision (parent-based) and samples new
// traces at the stage's ratio (OTEL_TRACES_SAMPLER).
const TracesSampler = "parentbased_traceidratio"

// Handler is the handler name of every function: the provided.al2023 runtime
// runs the file named bootstrap.
const Handler = "bootstrap"

// SearchAccess is what a function may do on the search index.
type SearchAccess int

// Search access levels.
const (
	SearchNone SearchAccess = iota
	// SearchRead queries the index: POST /products/_search, nothing else.
	SearchRead
	// SearchReadWrite keeps the index in step: creates it (PUT /products)
	// and writes and deletes documents in bulk (POST /products/_bulk); it
	// can neither delete nor reconfigure the index.
	SearchReadWrite
)

// SearchGrant is what a search access level may do: HTTP actions on paths
// of the domain (below its ARN).
type SearchGrant struct {
	Actions []string
	Paths   []string
}

// SearchGrants returns what an access level may do, the requests its code
// makes (shared/productsearch, functions/stream-indexer) and no other. Both
// the role's identity policy and the domain's access policy are made from it.
func SearchGrants(a SearchAccess) []SearchGrant {
	switch a {
	case SearchRead:
		return []SearchGrant{{Actions: []string{"es:ESHttpPost"}, Paths: []string{productsearch.Index + "/_search"}}}
	case SearchReadWrite:
		return []SearchGrant{
			{Actions: []string{"es:ESHttpPut"}, Paths: []string{productsearch.Index}},
			{Actions: []string{"es:ESHttpPost"}, Paths: []string{productsearch.Index + "/_bulk"}},
		}
	}
	return nil
}

// Access is what one function may touch: its environment contract
// (shared/envcontract: its tables, the tables whose streams feed it, the
// archive, the search endpoint, the cursor secret) and what it may do with
// each. Its environment and its grants both come from here, so a function
// never holds a name it may not use, nor a grant it has no name for.
type Access struct {
	envcontract.Contract
	// TableActions are the DynamoDB actions it may call on each of Tables:
	// those its requests need and no other (TestGrantsMatchSDKCalls reads
	// them from its code). Never the table's settings.
	TableActions map[string][]string
	// SearchAccess is what it may do on the search index; the contract's
	// Search says whether it has any.
	SearchAccess SearchAccess
	MemoryMiB    int
	// Timeout is the function's timeout (wiring.Timeout).
	Timeout time.Duration
}

// Accesses returns the access of every function of wiring.Functions.
func Accesses() map[string]Access {
	return map[string]Access{
		wiring.API: {
			Contract: envcontract.Of(wiring.API),
			TableActions: map[string][]string{
				tables.Users:           {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
				tables.UserEmails:      {"dynamodb:PutItem", "dynamodb:DeleteItem"},
				tables.Products:        {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
				tables.ProductStock:    {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
				tables.Reviews:         {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"},
				tables.Carts:           {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
				tables.Orders:          {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"},
				tables.IdempotencyKeys: {"dynamodb:GetItem", "dynamodb:PutItem"},
			},
			SearchAccess: SearchRead,
			MemoryMiB:    512,
			Timeout:      wiring.Timeout(wiring.API),
		},
		wiring.Counters: {
			Contract: envcontract.Of(wiring.Counters),
			TableActions: map[string][]string{
				tables.Users:         {"dynamodb:UpdateItem"},
				tables.Products:      {"dynamodb:UpdateItem"},
				tables.CounterEvents: {"dynamodb:PutItem"},
			},
			MemoryMiB: 256,
			Timeout:   wiring.Timeout(wiring.Counters),
		},
		wiring.StreamIndexer: {
			Contract:     envcontract.Of(wiring.StreamIndexer),
			SearchAccess: SearchReadWrite,
			MemoryMiB:    256,
			Timeout:      wiring.Timeout(wiring.StreamIndexer),
		},
		wiring.Archiver: {
			Contract:  envcontract.Of(wiring.Archiver),
			MemoryMiB: 256,
			Timeout:   wiring.Timeout(wiring.Archiver),
		},
	}
}

// ArchivedTables returns the tables whose streams feed the archiver, sorted:
// the archiver writes under their prefixes only.
func ArchivedTables() []string { return envcontract.Of(wiring.Archiver).StreamTables }

// functions declares every function of wiring.Functions with one helper and
// grants it exactly its Access.
func (b *builder) functions() error {
	acc := Accesses()
	var searchRoles []searchRole
	for _, name := range wiring.Functions() {
		a, ok := acc[name]
		if !ok {
			return fmt.Errorf("function %s: no access declared", name)
		}
		env := map[string]*string{}
		for _, tn := range append(append([]string(nil), a.Tables...), a.StreamTables...) {
			t, err := tables.ByName(tn)
			if err != nil {
				return fmt.Errorf("function %s: %w", name, err)
			}
			table, ok := b.s.Tables[tn]
			if !ok {
				return fmt.Errorf("function %s: table %s not in the stack", name, tn)
			}
			env[t.EnvVar] = table.TableName()
		}
		if a.Search != (a.SearchAccess != SearchNone) {
			return fmt.Errorf("function %s: its contract's search endpoint and its search access disagree", name)
		}
		if a.Archive {
			env[envcontract.ArchiveBucket] = b.s.Archive.BucketName()
		}
		if a.Search {
			env[envcontract.SearchURL] = jsii.String("https://" + *b.s.Search.DomainEndpoint())
		}
		if a.CursorSecret {
			// The secret's name, not its value: the function reads the value
			// at init, so neither the template nor the function's
			// configuration ever holds the key.
			env[envcontract.CursorSecretARN] = b.s.CursorSecret.SecretArn()
		}
		// X-Ray's OTLP endpoint in the stack's region; the role's
		// xray:PutTraceSegments (active tracing grants it) authorizes it.
		env[envcontract.OTLPTracesEndpoint] = awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("https://xray."), awscdk.Aws_REGION(), jsii.String(".amazonaws.com/v1/traces")})
		env[envcontract.TracesSampler] = jsii.String(TracesSampler)
		env[envcontract.TracesSamplerArg] = jsii.String(b.cfg.TraceSampleRatio)
		fn, err := b.goFunction(name, a, env)
		if err != nil {
			return err
		}
		b.liveAlias(name, fn)
		for _, tn := range a.Tables {
			if len(a.TableActions[tn]) == 0 {
				return fmt.Errorf("function %s: no actions declared on table %s", name, tn)
			}
			b.grantTable(fn, tn, a.TableActions[tn])
		}
		if a.Archive {
			// PutObject (and aborting the multipart uploads it may start),
			// nothing else, under each archived table's own prefix.
			var prefixes []*string
			for _, tn := range ArchivedTables() {
				prefixes = append(prefixes, b.s.Archive.ArnForObjects(jsii.String(tn+"/*")))
			}
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee:      fn,
				Actions:      jsii.Strings("s3:PutObject", "s3:AbortMultipartUpload"),
				ResourceArns: &prefixes,
			})
		}
		if a.CursorSecret {
			// That one secret's values, nothing else of Secrets Manager.
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee:      fn,
				Actions:      jsii.Strings("secretsmanager:GetSecretValue"),
				ResourceArns: &[]*string{b.s.CursorSecret.SecretArn()},
			})
		}
		for _, g := range SearchGrants(a.SearchAccess) {
			arns := make([]*string, len(g.Paths))
			for i, p := range g.Paths {
				arns[i] = jsii.String(*b.s.Search.DomainArn() + "/" + p)
			}
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee:      fn,
				Actions:      jsii.Strings(g.Actions...),
				ResourceArns: &arns,
			})
		}
		if a.SearchAccess != SearchNone {
			searchRoles = append(searchRoles, searchRole{access: a.SearchAccess, role: fn.Role()})
		}
		b.s.Functions[name] = fn
	}
	b.searchAccessPolicy(searchRoles)
	return nil
}

// goFunction is the one helper for every Go function: provided.al2023 on arm64,
// the bootstrap of make build, JSON logs into its own log group with the
// stage's retention, active tracing, and a role that starts empty (no managed
// policy) and gets only what the caller grants.
func (b *builder) goFunction(name string, a Access, env map[string]*string) (awslambda.Function, error) {
	dir := filepath.Join(b.dist, name)
	if _, err := os.Stat(filepath.Join(dir, Handler)); err != nil {
		return nil, fmt.Errorf("function %s: %w (run make build)", name, err)
	}
	id := constructID(name)
	fnName := b.cfg.Name + "-" + name
	logs := awslogs.NewLogGroup(b.s.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + fnName),
		Retention:     b.cfg.LogRetention,
		RemovalPolicy: b.cfg.RemovalPolicy(),
	})
	role := awsiam.NewRole(b.s.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("shopstream " + name + " function"),
	})
	logs.GrantWrite(role)
	props := &awslambda.FunctionProps{
		FunctionName:  jsii.String(fnName),
		Description:   jsii.String("shopstream " + name),
		Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:  awslambda.Architecture_ARM_64(),
		Handler:       jsii.String(Handler),
		Code:          awslambda.Code_FromAsset(jsii.String(dir), nil),
		MemorySize:    jsii.Number(float64(a.MemoryMiB)),
		Timeout:       awscdk.Duration_Seconds(jsii.Number(a.Timeout.Seconds())),
		Environment:   &env,
		LoggingFormat: awslambda.LoggingFormat_JSON,
		LogGroup:      logs,
		Tracing:       awslambda.Tracing_ACTIVE,
		Role:          role,
	}
	if n, ok := b.cfg.ReservedConcurrency[name]; ok {
		props.ReservedConcurrentExecutions = jsii.Number(float64(n))
	}
	fn := awslambda.NewFunction(b.s.Stack, jsii.String(id+"Function"), props)
	return fn, nil
}

// liveAlias gives function name its live alias on the version this deploy
// publishes.
func (b *builder) liveAlias(name string, fn awslambda.Function) {
	id := constructID(name)
	aliasProps := &awslambda.AliasProps{
		AliasName:   jsii.String(LiveAlias),
		Version:     fn.CurrentVersion(),
		Description: jsii.String("the version that serves traffic"),
	}
	if name == wiring.API && b.cfg.APIProvisionedConcurrency > 0 {
		aliasProps.ProvisionedConcurrentExecutions = jsii.Number(float64(b.cfg.APIProvisionedConcurrency))
	}
	b.s.Aliases[name] = awslambda.NewAlias(b.s.Stack, jsii.String(id+"Live"), aliasProps)
}

// LiveAlias is the alias that serves every function's traffic.
const LiveAlias = "live"

// grantTable lets fn call actions on a table's items, and Query on its
// indexes when it may query. On the counters' marker table the items' keys
// must start with a fact's key prefix (dynamodb:LeadingKeys): the markers are
// keyed by fact, order#<id>#placed|cancelled and review#…#v<n>#in|out
// (shared/facts).
func (b *builder) grantTable(fn awslambda.IFunction, tn string, actions []string) {
	table := b.s.Tables[tn]
	resources := []*string{table.TableArn()}
	def, _ := tables.ByName(tn)
	if slices.Contains(actions, "dynamodb:Query") {
		// Each index by name: an index added later is not granted by
		// this one's statement.
		for _, ix := range def.GlobalIndexes {
			resources = append(resources, jsii.String(*table.TableArn()+"/index/"+ix.Name))
		}
		for _, ix := range def.LocalIndexes {
			resources = append(resources, jsii.String(*table.TableArn()+"/index/"+ix.Name))
		}
	}
	st := &awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: &resources}
	if tn == tables.CounterEvents {
		var prefixes []string
		for _, p := range facts.KeyPrefixes() {
			prefixes = append(prefixes, p+"*")
		}
		st.Conditions = &map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": prefixes}}
	}
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(st))
}
