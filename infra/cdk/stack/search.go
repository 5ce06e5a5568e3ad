package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsopensearchservice"
	"github.com/aws/jsii-runtime-go"
)

// search declares the OpenSearch domain of the products index: encrypted at
// rest and between nodes, HTTPS with TLS 1.2 only, SigV4-signed requests of the
// functions' roles only (searchAccessPolicy), and its slow and error logs in
// CloudWatch.
func (b *builder) search() {
	c := b.cfg.Search
	logGroup := func(id, kind string) awslogs.LogGroup {
		return awslogs.NewLogGroup(b.s.Stack, jsii.String(id), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/opensearch/" + b.cfg.Name + "/" + kind),
			Retention:     b.cfg.LogRetention,
			RemovalPolicy: b.cfg.RemovalPolicy(),
		})
	}
	appLogs := logGroup("SearchAppLogs", "application")
	slowSearch := logGroup("SearchSlowSearchLogs", "search-slow")
	slowIndex := logGroup("SearchSlowIndexLogs", "index-slow")
	// One resource policy of our own instead of the custom resource CDK would
	// otherwise deploy to write it. The service writes for this account's
	// domain only (aws:SourceAccount, aws:SourceArn): no other account's
	// domain may publish into these groups (the confused deputy).
	logPolicy := awslogs.NewResourcePolicy(b.s.Stack, jsii.String("SearchLogsPolicy"), &awslogs.ResourcePolicyProps{
		ResourcePolicyName: b.name("opensearch-logs"),
		PolicyStatements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("es.amazonaws.com"), nil)},
			Actions:    jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources:  &[]*string{appLogs.LogGroupArn(), slowSearch.LogGroupArn(), slowIndex.LogGroupArn()},
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"aws:SourceAccount": b.s.Stack.Account()},
				"ArnLike":      map[string]any{"aws:SourceArn": b.domainArn()},
			},
		})},
	})

	capacity := &awsopensearchservice.CapacityConfig{
		DataNodeInstanceType:      jsii.String(c.DataNodeType),
		DataNodes:                 jsii.Number(float64(c.DataNodes)),
		MultiAzWithStandbyEnabled: jsii.Bool(false),
	}
	if c.MasterNodes > 0 {
		capacity.MasterNodeInstanceType = jsii.String(c.MasterNodeType)
		capacity.MasterNodes = jsii.Number(float64(c.MasterNodes))
	}
	props := &awsopensearchservice.DomainProps{
		DomainName:           jsii.String(b.cfg.Name),
		Version:              awsopensearchservice.EngineVersion_OPENSEARCH_2_19(),
		Capacity:             capacity,
		Ebs:                  &awsopensearchservice.EbsOptions{VolumeSize: jsii.Number(float64(c.VolumeGiB)), VolumeType: awsec2.EbsDeviceVolumeType_GP3},
		EncryptionAtRest:     &awsopensearchservice.EncryptionAtRestOptions{Enabled: jsii.Bool(true)},
		NodeToNodeEncryption: jsii.Bool(true),
		EnforceHttps:         jsii.Bool(true),
		TlsSecurityPolicy:    awsopensearchservice.TLSSecurityPolicy_TLS_1_2,
		Logging: &awsopensearchservice.LoggingOptions{
			AppLogEnabled:        jsii.Bool(true),
			AppLogGroup:          appLogs,
			SlowSearchLogEnabled: jsii.Bool(true),
			SlowSearchLogGroup:   slowSearch,
			SlowIndexLogEnabled:  jsii.Bool(true),
			SlowIndexLogGroup:    slowIndex,
		},
		// A _bulk body may not name an index: the access policy's paths
		// (/products/_bulk) then bound what a bulk request writes.
		AdvancedOptions:            &map[string]*string{"rest.action.multi.allow_explicit_index": jsii.String("false")},
		SuppressLogsResourcePolicy: jsii.Bool(true),
		EnableVersionUpgrade:       jsii.Bool(true),
		RemovalPolicy:              b.cfg.RemovalPolicy(),
	}
	if c.AvailabilityZones > 1 {
		props.ZoneAwareness = &awsopensearchservice.ZoneAwarenessConfig{
			Enabled:               jsii.Bool(true),
			AvailabilityZoneCount: jsii.Number(float64(c.AvailabilityZones)),
		}
	}
	domain := awsopensearchservice.NewDomain(b.s.Stack, jsii.String("SearchDomain"), props)
	domain.Node().AddDependency(logPolicy)
	b.s.Search = domain
}

// searchRole is a role that reaches the search domain, and how.
type searchRole struct {
	access SearchAccess
	role   awsiam.IRole
}

// domainArn is the search domain's ARN, built from its name: the domain's
// own Arn attribute would make the domain (and the log policy it waits
// for) depend on itself.
func (b *builder) domainArn() *string {
	return b.s.Stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("es"),
		Resource:     jsii.String("domain"),
		ResourceName: jsii.String(b.cfg.Name),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

// searchAccessPolicy lets the given roles reach the products index, each
// with its own statement holding its level's verbs (SearchGrants) and no
// other. It is set on the domain resource itself: CDK's accessPolicies prop
// would deploy a custom resource (a Lambda function) to write it.
func (b *builder) searchAccessPolicy(roles []searchRole) {
	domain := *b.domainArn()
	var statements []any
	for _, r := range roles {
		for _, g := range SearchGrants(r.access) {
			resources := make([]string, len(g.Paths))
			for i, p := range g.Paths {
				resources[i] = domain + "/" + p
			}
			statements = append(statements, map[string]any{
				"Effect":    "Allow",
				"Principal": map[string]any{"AWS": r.role.RoleArn()},
				"Action":    g.Actions,
				"Resource":  resources,
			})
		}
	}
	cfn := b.s.Search.Node().DefaultChild().(awsopensearchservice.CfnDomain)
	cfn.SetAccessPolicies(map[string]any{"Version": "2012-10-17", "Statement": statements})
}
