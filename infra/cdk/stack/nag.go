package stack

import (
	"regexp"
	"strings"

	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/shopstream/shopstream/shared/wiring"
)

// suppressions records, next to the resource, why each AwsSolutions finding
// that remains is accepted. Every one carries its reason; the tests check
// that none is left without one and that no error is left unsuppressed.
func (b *builder) suppressions() {
	suppress := func(construct any, children bool, s ...*cdknag.NagPackSuppression) {
		cdknag.NagSuppressions_AddResourceSuppressions(construct, &s, jsii.Bool(children))
	}
	rule := func(id, reason string, appliesTo ...any) *cdknag.NagPackSuppression {
		s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
		if len(appliesTo) > 0 {
			s.AppliesTo = &appliesTo
		}
		return s
	}
	regex := func(pattern string) any {
		return &cdknag.RegexAppliesTo{Regex: jsii.String("/" + pattern + "/g")}
	}

	acc := Accesses()
	for _, name := range wiring.Functions() {
		a := acc[name]
		role := b.s.Functions[name].Role()
		reasons := []*cdknag.NagPackSuppression{
			rule("AwsSolutions-IAM5", "Only actions without resource-level permissions use *: xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) and dynamodb:ListStreams (stream event sources); the tests fail on any other action on *.",
				"Resource::*"),
		}
		if len(a.Tables) > 0 {
			reasons = append(reasons, rule("AwsSolutions-IAM5", "Queries on the function's own tables' secondary indexes; the index names come from shared/tables and every index of those tables is queried.",
				regex(`^Resource::<[A-Za-z]+Table[0-9A-F]{8}\.Arn>\/index\/\*$`)))
		}
		if a.Archive {
			reasons = append(reasons, rule("AwsSolutions-IAM5", "Objects under the archived tables' own prefixes, whose keys carry the removal date and batch: "+strings.Join(ArchivedTables(), ", ")+".",
				regex(`^Resource::<ArchiveBucket[0-9A-F]{8}\.Arn>\/(`+alternatives(ArchivedTables())+`)\/\*$`)))
		}
		if len(a.StreamTables) > 0 {
			reasons = append(reasons, rule("AwsSolutions-IAM5", "Lambda writes a discarded batch of the function's mappings under aws/lambda/<mapping uuid>/<shard>/<date>/, keys it chooses, and checks the role when it creates a mapping: PutObject on the failure bucket's objects as the Lambda developer guide's policy grants it (a grant under aws/lambda/* only has been reported to fail that check), denied under replayed/, on a bucket of this account only.",
				regex(`^Resource::<FailureBucket[0-9A-F]{8}\.Arn>\/\*$`)))
		}
		suppress(role, true, reasons...)
	}

	suppress(b.s.CursorSecret, false, rule("AwsSolutions-SMG4", "The cursor key is rotated by hand with Secrets Manager's version stages (docs/deploy.md): the API accepts the pending and previous values, so no rotation function is needed and no cursor fails during a rotation."))

	domain := []*cdknag.NagPackSuppression{
		rule("AwsSolutions-OS1", "The functions are not in a VPC; the domain takes only SigV4-signed HTTPS requests from the indexer's and the API's roles (access policy and identity policies), encrypted in transit and at rest."),
		rule("AwsSolutions-OS3", "Access is by IAM identity (the functions' roles), not by IP address: Lambda has no fixed source address."),
	}
	if b.cfg.Search.MasterNodes == 0 {
		domain = append(domain, rule("AwsSolutions-OS4", "Single-node development domain; prod runs three dedicated master nodes."))
	}
	if b.cfg.Search.AvailabilityZones < 2 {
		domain = append(domain, rule("AwsSolutions-OS7", "Single-node development domain; prod spreads its nodes over two zones. The index can be rebuilt from the products table."))
	}
	suppress(b.s.Search, true, domain...)

	pool := b.s.Stack.Node().FindChild(jsii.String("UserPool"))
	poolRules := []*cdknag.NagPackSuppression{
		rule("AwsSolutions-COG2", "Shoppers may enrol a TOTP second factor (MFA optional); requiring it would turn away guests at sign-up. Admins need one: the pre-token-generation trigger keeps the admin group to members with TOTP enabled, takes any other member out of it and leaves admin out of their tokens (functions/pre-token)."),
	}
	if !b.cfg.UserPoolPlus {
		poolRules = append(poolRules, rule("AwsSolutions-COG8", "The development pool stays on the Essentials plan; prod is on Plus with threat protection enforced."))
	}
	suppress(pool, true, poolRules...)

	hookRole := b.s.Stack.Node().FindChild(jsii.String(constructID(HookFunction) + "Role"))
	suppress(hookRole, true, rule("AwsSolutions-IAM5", "Only xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) use *: they have no resource-level permissions. The hook invokes exactly the version under release and reports to the API's deployment group only.", "Resource::*"))
	tokenRole := b.s.Stack.Node().FindChild(jsii.String(constructID(TokenFunction) + "Role"))
	suppress(tokenRole, true, rule("AwsSolutions-IAM5", "Only xray:PutTraceSegments and xray:PutTelemetryRecords (active tracing) use *: they have no resource-level permissions. The trigger reads users of this stack's pool and takes them out of a group, nothing else (cognito-idp:AdminGetUser and AdminRemoveUserFromGroup on its ARN).", "Resource::*"))
	apiDeployRole := b.s.Stack.Node().FindChild(jsii.String(constructID(wiring.API) + "DeploymentRole"))
	suppress(apiDeployRole, true, rule("AwsSolutions-IAM5", "CodeDeploy invokes the pre-traffic hook, one function; the :* covers that function's qualifiers only.",
		regex(`^Resource::<DeployHookFunction[0-9A-F]{8}\.Arn>:\*$`)))
	for _, name := range wiring.Functions() {
		role := b.s.Stack.Node().FindChild(jsii.String(constructID(name) + "DeploymentRole"))
		suppress(role, true, rule("AwsSolutions-IAM4", "CodeDeploy's LambdaDeploymentGroup attaches AWSCodeDeployRoleForLambdaLimited; the template drops it (ManagedPolicyArns removed) and the role keeps only its inline statements: this function's alias and its release alarms.",
			"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSCodeDeployRoleForLambdaLimited"))
	}

	cdn := []*cdknag.NagPackSuppression{
		rule("AwsSolutions-CFR1", "The products and search are sold worldwide: no country is refused."),
		rule("AwsSolutions-CFR2", "The CDN serves public GET routes only, whose answers it caches; the API behind it has its own throttling (stage rate and burst limits) and API Gateway's access log."),
		rule("AwsSolutions-CFR3", "Every request that reaches the API through the CDN is in API Gateway's access log; CloudFront's standard logs need ACLs on their bucket, which every bucket of this stack disables (object ownership enforced)."),
	}
	if b.cfg.CDNDomain == "" {
		cdn = append(cdn, rule("AwsSolutions-CFR4", "No cdnDomain is set: the distribution answers at its *.cloudfront.net name, whose certificate CloudFront serves under its TLSv1 policy whatever the template says; HTTPS only is enforced. Set cdnDomain and cdnCertificateArn for TLSv1.2_2021 (docs/deploy.md)."))
	}
	suppress(b.cdnDist, true, cdn...)

	for _, r := range b.api.public {
		suppress(r, true, rule("AwsSolutions-APIG4", "A public route of the API (docs/contract.md, section 2: health check, product pages, reviews of a product, search): anyone may read it without a token."))
	}
}

// alternatives is a regexp alternation of literal names.
func alternatives(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return strings.Join(q, "|")
}
