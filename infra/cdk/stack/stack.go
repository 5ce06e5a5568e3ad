// Package stack holds the CDK stack of shopstream: tables, functions, stream
// wiring, HTTP API, archive, search and monitoring. It declares none of them by
// hand: tables come from shared/tables, event-source mappings from shared/wiring,
// routes from shared/routes, and what each function may touch from access below.
package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsopensearchservice"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Route is one declared HTTP route: method, path pattern in API Gateway syntax
// ("/products/{productId}") and whether it is served without a token.
type Route struct {
	Method string
	Path   string
	Public bool
}

// Props configures the stack.
type Props struct {
	awscdk.StackProps
	Config Config
	// DistDir holds dist/<fn>/bootstrap for every function (make build).
	DistDir string
	// Routes are the HTTP API's routes.
	Routes []Route
	// AlarmEmail, if set, is subscribed to the alarm topic.
	AlarmEmail string
}

// Stack is the synthesized stack with handles on what tests look at.
type Stack struct {
	awscdk.Stack
	Tables    map[string]awsdynamodb.Table
	Functions map[string]awslambda.Function
	Queues    map[string]awssqs.Queue
	Archive   awss3.Bucket
	Search    awsopensearchservice.Domain
}

// New builds the stack of a stage.
func New(scope constructs.Construct, id string, p Props) (*Stack, error) {
	if p.Config.Name == "" {
		return nil, fmt.Errorf("stack %s: no stage configuration", id)
	}
	if p.DistDir == "" {
		return nil, fmt.Errorf("stack %s: no dist directory", id)
	}
	sp := p.StackProps
	if sp.StackName == nil {
		sp.StackName = jsii.String(p.Config.Name)
	}
	if sp.Description == nil {
		sp.Description = jsii.String(fmt.Sprintf("shopstream %s: commerce API, stream processors, archive and search", p.Config.Stage))
	}
	sp.TerminationProtection = jsii.Bool(p.Config.RetainData)
	st := awscdk.NewStack(scope, jsii.String(id), &sp)
	// Server access logs are delivered under a bucket policy, not the
	// LogDeliveryWrite ACL, so every bucket can enforce its owner.
	st.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("shopstream"), nil)
	awscdk.Tags_Of(st).Add(jsii.String("stage"), jsii.String(p.Config.Stage), nil)

	s := &Stack{
		Stack:     st,
		Tables:    map[string]awsdynamodb.Table{},
		Functions: map[string]awslambda.Function{},
		Queues:    map[string]awssqs.Queue{},
	}
	b := &builder{s: s, cfg: p.Config, dist: p.DistDir}
	b.tables()
	b.archive()
	b.search()
	if err := b.functions(); err != nil {
		return nil, err
	}
	if err := b.streams(); err != nil {
		return nil, err
	}
	if err := b.httpAPI(p.Routes); err != nil {
		return nil, err
	}
	b.monitoring(p.AlarmEmail)
	b.suppressions()
	return s, nil
}

// builder carries what the parts of the stack share while it is built.
type builder struct {
	s    *Stack
	cfg  Config
	dist string

	api httpAPIParts
}

func (b *builder) name(suffix string) *string { return jsii.String(b.cfg.Name + "-" + suffix) }
