package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscodedeploy"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/wiring"
)

// DeploymentGroup names the CodeDeploy deployment group of a function.
func DeploymentGroup(stage, fn string) string { return "shopstream-" + stage + "-" + fn }

// HookFunction is the API's pre-traffic hook (functions/deploy-hook): it is
// built and deployed with the others, outside shared/wiring, since nothing
// but CodeDeploy calls it.
const HookFunction = "deploy-hook"

// TokenFunction is the user pool's pre-token-generation trigger
// (functions/pre-token): admin reaches a token only for an admin with a
// second factor. Cognito calls it, so it is outside shared/wiring too.
const TokenFunction = "pre-token"

// BuiltFunctions are the functions make build builds: shared/wiring's, the
// hook and the token trigger.
func BuiltFunctions() []string { return append(wiring.Functions(), HookFunction, TokenFunction) }

// ReleaseApplication names the CodeDeploy application of a stage's releases.
func ReleaseApplication(stage string) string { return "shopstream-" + stage + "-releases" }

// releases moves every function's live alias to its new version through
// CodeDeploy, rolled back automatically when the deployment fails or one of
// its alarms fires. The API shifts traffic by the stage's canary or linear
// configuration, watching its live alias's errors and p99 duration and the
// API's 5xx; the stream functions shift all at once (docs/decisions.md:
// weighted traffic would split a shard's batches and their retries between
// two versions), watching their errors and iterator age.
func (b *builder) releases() error {
	hook, err := b.releaseHook()
	if err != nil {
		return err
	}
	period := awscdk.Duration_Minutes(jsii.Number(1))
	sum := &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Sum")}
	app := awscodedeploy.NewLambdaApplication(b.s.Stack, jsii.String("Releases"), &awscodedeploy.LambdaApplicationProps{
		ApplicationName: jsii.String(ReleaseApplication(b.cfg.Stage)),
	})
	action := awscloudwatchactions.NewSnsAction(b.s.AlarmTopic)
	alarm := func(id string, m awscloudwatch.IMetric, threshold float64, desc string) interfacesawscloudwatch.IAlarmRef {
		a := awscloudwatch.NewAlarm(b.s.Stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          b.name("release-" + id),
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		return a
	}
	for _, name := range wiring.Functions() {
		live := b.s.Aliases[name]
		id := constructID(name)
		alarms := []interfacesawscloudwatch.IAlarmRef{
			alarm(id+"ReleaseErrors", live.MetricErrors(sum), 1, fmt.Sprintf("%s: a live-alias invocation failed during a release", name)),
		}
		config := awscodedeploy.LambdaDeploymentConfig_ALL_AT_ONCE()
		if name == wiring.API {
			p99 := live.MetricDuration(&awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("p99")})
			rate := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression:   jsii.String("IF(requests > 0, 100 * errors / requests, 0)"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{"errors": b.api.api.MetricServerError(sum), "requests": b.api.api.MetricCount(sum)},
				Period:       period,
				Label:        jsii.String("API 5xx %"),
			})
			alarms = append(alarms,
				alarm(id+"ReleaseP99", p99, 3000, "API: p99 duration of the live alias at 3 s or more during a release"),
				alarm(id+"Release5xx", rate, 1, "API: 1 % or more of requests answered 5xx during a release"),
			)
			config = apiDeploymentConfig(b.cfg.APIDeployment)
		} else {
			age := b.s.Functions[name].Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Maximum")})
			alarms = append(alarms, alarm(id+"ReleaseIteratorAge", age, 60_000, name+": records waited a minute or more during a release"))
		}
		// CodeDeploy's role: move this alias and read its alarms, nothing
		// else (the managed AWSCodeDeployRoleForLambdaLimited allows any
		// alias and any alarm).
		role := awsiam.NewRole(b.s.Stack, jsii.String(id+"DeploymentRole"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("codedeploy.amazonaws.com"), nil),
			Description: jsii.String("CodeDeploy: shifts " + name + "'s live alias"),
		})
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("lambda:GetAlias", "lambda:UpdateAlias", "lambda:GetProvisionedConcurrencyConfig"),
			Resources: &[]*string{live.FunctionArn(), b.s.Functions[name].FunctionArn()},
		}))
		alarmARNs := make([]*string, len(alarms))
		for i, a := range alarms {
			alarmARNs[i] = a.(awscloudwatch.IAlarm).AlarmArn()
		}
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("cloudwatch:DescribeAlarms"),
			Resources: &alarmARNs,
		}))
		var pre awslambda.IFunction
		if name == wiring.API {
			pre = hook
		}
		group := awscodedeploy.NewLambdaDeploymentGroup(b.s.Stack, jsii.String(id+"Deployment"), &awscodedeploy.LambdaDeploymentGroupProps{
			PreHook:             pre,
			Application:         app,
			Role:                role,
			Alias:               live,
			DeploymentGroupName: jsii.String(DeploymentGroup(b.cfg.Stage, name)),
			DeploymentConfig:    config,
			Alarms:              &alarms,
			AutoRollback: &awscodedeploy.AutoRollbackConfig{
				FailedDeployment:  jsii.Bool(true),
				DeploymentInAlarm: jsii.Bool(true),
				StoppedDeployment: jsii.Bool(true),
			},
		})
		// The group attaches the managed AWSCodeDeployRoleForLambdaLimited
		// to its role; the statements above are all it needs.
		_ = group
		role.Node().DefaultChild().(awsiam.CfnRole).AddPropertyDeletionOverride(jsii.String("ManagedPolicyArns"))
	}
	return nil
}

// releaseHook declares the API's pre-traffic hook: it invokes the version
// this deploy publishes (nothing else) and reports to CodeDeploy (the
// deployment group grants that).
func (b *builder) releaseHook() (awslambda.Function, error) {
	target := b.s.Functions[wiring.API].CurrentVersion()
	fn, err := b.goFunction(HookFunction, Access{MemoryMiB: 128, Timeout: 60 * time.Second},
		map[string]*string{"TARGET_VERSION_ARN": target.FunctionArn()})
	if err != nil {
		return nil, err
	}
	target.GrantInvoke(fn)
	return fn, nil
}

// apiDeploymentConfig is the predefined configuration a stage names.
func apiDeploymentConfig(name string) awscodedeploy.ILambdaDeploymentConfig {
	switch name {
	case "Canary10Percent5Minutes":
		return awscodedeploy.LambdaDeploymentConfig_CANARY_10PERCENT_5MINUTES()
	case "Canary10Percent15Minutes":
		return awscodedeploy.LambdaDeploymentConfig_CANARY_10PERCENT_15MINUTES()
	case "Linear10PercentEvery1Minute":
		return awscodedeploy.LambdaDeploymentConfig_LINEAR_10PERCENT_EVERY_1MINUTE()
	case "Linear10PercentEvery3Minutes":
		return awscodedeploy.LambdaDeploymentConfig_LINEAR_10PERCENT_EVERY_3MINUTES()
	}
	return awscodedeploy.LambdaDeploymentConfig_ALL_AT_ONCE()
}
