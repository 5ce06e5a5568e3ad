package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Environment variables that are not table names (those are tables.Table.EnvVar).
const (
	EnvArchiveBucket = "ARCHIVE_BUCKET"
	// EnvSearchURL is the search endpoint, https://<domain endpoint>.
	EnvSearchURL = "SEARCH_URL"
	// EnvCursorSecret is the key that signs the API's page cursors where no
	// secret holds it (the local stack).
	EnvCursorSecret = "CURSOR_SECRET"
	// EnvCursorSecretARN names the Secrets Manager secret holding the cursor
	// key on AWS; the API reads it at init (functions/api).
	EnvCursorSecretARN = "CURSOR_SECRET_ARN"
)

// SearchIndex is the one OpenSearch index of shopstream.
const SearchIndex = "products"

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
		return []SearchGrant{{Actions: []string{"es:ESHttpPost"}, Paths: []string{SearchIndex + "/_search"}}}
	case SearchReadWrite:
		return []SearchGrant{
			{Actions: []string{"es:ESHttpPut"}, Paths: []string{SearchIndex}},
			{Actions: []string{"es:ESHttpPost"}, Paths: []string{SearchIndex + "/_bulk"}},
		}
	}
	return nil
}

// Access is what one function may touch. Its environment and its grants both
// come from here, so a function never holds a name it may not use, nor a grant
// it has no name for. Stream reads come from shared/wiring.
type Access struct {
	// Tables are the tables whose data the function reads or writes.
	Tables []string
	// TableActions are the DynamoDB actions it may call on each of Tables:
	// those its requests need and no other (TestGrantsMatchSDKCalls reads
	// them from its code). Never the table's settings.
	TableActions map[string][]string
	// Search is its access to the search index.
	Search SearchAccess
	// CursorSecret gives the function the cursor signing key.
	CursorSecret bool
	// Archive lets the function put objects under the prefix of every table
	// whose stream feeds it (shared/wiring).
	Archive bool
	// StreamTables are the tables whose streams feed the function: it gets
	// their names (to tell records apart), not access to their data.
	StreamTables []string
	MemoryMiB    int
	// Timeout is the function's timeout (wiring.Timeout).
	Timeout time.Duration
}

// streamTables returns the tables whose streams feed fn (shared/wiring), sorted.
func streamTables(fn string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range wiring.Mappings() {
		if m.Function == fn && !seen[m.Table] {
			seen[m.Table] = true
			out = append(out, m.Table)
		}
	}
	sort.Strings(out)
	return out
}

// Accesses returns the access of every function of wiring.Functions.
func Accesses() map[string]Access {
	return map[string]Access{
		wiring.API: {
			Tables: []string{tables.Users, tables.UserEmails, tables.Products, tables.ProductStock, tables.Reviews, tables.Carts, tables.Orders, tables.IdempotencyKeys},
			TableActions: map[string][]string{
				tables.Users:           {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
				tables.UserEmails:      {"dynamodb:PutItem", "dynamodb:DeleteItem"},
				tables.Products:        {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
				tables.ProductStock:    {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
				tables.Reviews:         {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"},
				tables.Carts:           {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
				tables.Orders:          {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"},
				tables.IdempotencyKeys: {"dynamodb:GetItem", "dynamodb:PutItem"},
			},
			Search:       SearchRead,
			CursorSecret: true,
			MemoryMiB:    512,
			Timeout:      wiring.Timeout(wiring.API),
		},
		wiring.Counters: {
			Tables: []string{tables.Users, tables.Products, tables.CounterEvents},
			TableActions: map[string][]string{
				tables.Users:         {"dynamodb:UpdateItem"},
				tables.Products:      {"dynamodb:UpdateItem"},
				tables.CounterEvents: {"dynamodb:PutItem"},
			},
			StreamTables: streamTables(wiring.Counters),
			MemoryMiB:    256,
			Timeout:      wiring.Timeout(wiring.Counters),
		},
		wiring.StreamIndexer: {
			Search:       SearchReadWrite,
			StreamTables: streamTables(wiring.StreamIndexer),
			MemoryMiB:    256,
			Timeout:      wiring.Timeout(wiring.StreamIndexer),
		},
		wiring.Archiver: {
			Archive:      true,
			StreamTables: streamTables(wiring.Archiver),
			MemoryMiB:    256,
			Timeout:      wiring.Timeout(wiring.Archiver),
		},
	}
}

// ArchivedTables returns the tables whose streams feed the archiver, sorted:
// the archiver writes under their prefixes only.
func ArchivedTables() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range wiring.Mappings() {
		if m.Function == wiring.Archiver && !seen[m.Table] {
			seen[m.Table] = true
			out = append(out, m.Table)
		}
	}
	sort.Strings(out)
	return out
}

// EnvKeys returns the names of the environment variables of a function, sorted;
// template.yaml must give the function the same ones.
func (a Access) EnvKeys() ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	for _, name := range append(append([]string(nil), a.Tables...), a.StreamTables...) {
		t, err := tables.ByName(name)
		if err != nil {
			return nil, err
		}
		if !seen[t.EnvVar] {
			seen[t.EnvVar] = true
			keys = append(keys, t.EnvVar)
		}
	}
	if a.Archive {
		keys = append(keys, EnvArchiveBucket)
	}
	if a.Search != SearchNone {
		keys = append(keys, EnvSearchURL)
	}
	if a.CursorSecret {
		keys = append(keys, EnvCursorSecretARN)
	}
	sort.Strings(keys)
	return keys, nil
}

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
		if a.Archive {
			env[EnvArchiveBucket] = b.s.Archive.BucketName()
		}
		if a.Search != SearchNone {
			env[EnvSearchURL] = jsii.String("https://" + *b.s.Search.DomainEndpoint())
		}
		if a.CursorSecret {
			// The secret's name, not its value: the function reads the value
			// at init, so neither the template nor the function's
			// configuration ever holds the key.
			env[EnvCursorSecretARN] = b.s.CursorSecret.SecretArn()
		}
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
		for _, g := range SearchGrants(a.Search) {
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
		if a.Search != SearchNone {
			searchRoles = append(searchRoles, searchRole{access: a.Search, role: fn.Role()})
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
	if len(def.GlobalIndexes)+len(def.LocalIndexes) > 0 && slices.Contains(actions, "dynamodb:Query") {
		resources = append(resources, jsii.String(*table.TableArn()+"/index/*"))
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
