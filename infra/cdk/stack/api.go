package stack

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscognito"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/routes"
	"github.com/shopstream/shopstream/shared/wiring"
)

// AdminGroup is the Cognito group whose members the API treats as admins
// (claim cognito:groups).
const AdminGroup = routes.AdminGroup

// Stack output names.
const (
	OutputAPIURL         = "ApiUrl"
	OutputUserPoolID     = "UserPoolId"
	OutputUserPoolClient = "UserPoolClientId"
	OutputArchiveBucket  = "ArchiveBucketName"
	OutputSearchEndpoint = "SearchEndpoint"
)

type httpAPIParts struct {
	api   awsapigatewayv2.HttpApi
	stage awsapigatewayv2.HttpStage
	// public are the routes served without a token, for the nag suppressions.
	public []awsapigatewayv2.HttpRoute
}

// accessLogFormat is the JSON line API Gateway writes per request: enough to
// follow a request into the function's logs (requestId), no body, no token.
func accessLogFormat() string {
	f := map[string]string{
		"requestId":        "$context.requestId",
		"ip":               "$context.identity.sourceIp",
		"requestTime":      "$context.requestTime",
		"routeKey":         "$context.routeKey",
		"status":           "$context.status",
		"protocol":         "$context.protocol",
		"responseLength":   "$context.responseLength",
		"latencyMs":        "$context.responseLatency",
		"integrationMs":    "$context.integrationLatency",
		"integrationError": "$context.integrationErrorMessage",
		"authorizerError":  "$context.authorizer.error",
	}
	out, _ := json.Marshal(f) // a map of strings always encodes
	return string(out)
}

// httpAPI declares the user pool (with the admin group), the HTTP API with its
// JWT authorizer on every route but the public ones, CORS, throttling and
// access logs, and the stack outputs a client needs.
func (b *builder) httpAPI(routes []Route) error {
	if len(routes) == 0 {
		return fmt.Errorf("http api: no routes")
	}
	poolProps := &awscognito.UserPoolProps{
		UserPoolName:      b.name("users"),
		SelfSignUpEnabled: jsii.Bool(true),
		SignInAliases:     &awscognito.SignInAliases{Email: jsii.Bool(true)},
		AutoVerify:        &awscognito.AutoVerifiedAttrs{Email: jsii.Bool(true)},
		// A changed address takes effect once its owner confirms it: until
		// then the pool keeps the original, and tokens carry it verified.
		KeepOriginal: &awscognito.KeepOriginalAttrs{Email: jsii.Bool(true)},
		PasswordPolicy: &awscognito.PasswordPolicy{
			MinLength:        jsii.Number(12),
			RequireDigits:    jsii.Bool(true),
			RequireLowercase: jsii.Bool(true),
			RequireUppercase: jsii.Bool(true),
			RequireSymbols:   jsii.Bool(true),
		},
		Mfa:                awscognito.Mfa_OPTIONAL,
		MfaSecondFactor:    &awscognito.MfaSecondFactor{Otp: jsii.Bool(true), Sms: jsii.Bool(false)},
		AccountRecovery:    awscognito.AccountRecovery_EMAIL_ONLY,
		DeletionProtection: jsii.Bool(b.cfg.DeletionProtection),
		RemovalPolicy:      b.cfg.RemovalPolicy(),
	}
	// Essentials at least: the pre-token trigger's version 2 event, the one
	// whose group override reaches the access token, needs it.
	poolProps.FeaturePlan = awscognito.FeaturePlan_ESSENTIALS
	if b.cfg.UserPoolPlus {
		poolProps.FeaturePlan = awscognito.FeaturePlan_PLUS
		poolProps.StandardThreatProtectionMode = awscognito.StandardThreatProtectionMode_FULL_FUNCTION
	}
	pool := awscognito.NewUserPool(b.s.Stack, jsii.String("UserPool"), poolProps)
	if err := b.adminGate(pool); err != nil {
		return err
	}
	client := pool.AddClient(jsii.String("WebClient"), &awscognito.UserPoolClientOptions{
		UserPoolClientName:         b.name("web"),
		AuthFlows:                  &awscognito.AuthFlow{UserSrp: jsii.Bool(true)},
		PreventUserExistenceErrors: jsii.Bool(true),
		GenerateSecret:             jsii.Bool(false),
		// No OAuth flows: the pool has no hosted-UI domain, and CDK's
		// defaults (code and implicit grants, every scope, a placeholder
		// callback URL) would hand tokens to a host nobody controls the day
		// one is added.
		DisableOAuth: jsii.Bool(true),
		// The shop's pages read and write a user's address and name only.
		ReadAttributes: awscognito.NewClientAttributes().WithStandardAttributes(&awscognito.StandardAttributesMask{
			Email: jsii.Bool(true), EmailVerified: jsii.Bool(true), Fullname: jsii.Bool(true),
		}),
		WriteAttributes: awscognito.NewClientAttributes().WithStandardAttributes(&awscognito.StandardAttributesMask{
			Email: jsii.Bool(true), Fullname: jsii.Bool(true),
		}),
	})
	awscognito.NewCfnUserPoolGroup(b.s.Stack, jsii.String("AdminGroup"), &awscognito.CfnUserPoolGroupProps{
		UserPoolId:  pool.UserPoolId(),
		GroupName:   jsii.String(AdminGroup),
		Description: jsii.String("shopstream administrators: products, order status, every user's data"),
	})
	authorizer := awsapigatewayv2authorizers.NewHttpUserPoolAuthorizer(jsii.String("JwtAuthorizer"), pool, &awsapigatewayv2authorizers.HttpUserPoolAuthorizerProps{
		AuthorizerName:  jsii.String("cognito-jwt"),
		UserPoolClients: &[]awscognito.IUserPoolClient{client},
	})
	live, ok := b.s.Aliases[wiring.API]
	if !ok {
		return fmt.Errorf("http api: no live alias of function %s", wiring.API)
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), live, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
		PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
	})

	api := awsapigatewayv2.NewHttpApi(b.s.Stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            b.name("api"),
		Description:        jsii.String("shopstream HTTP API"),
		CreateDefaultStage: jsii.Bool(false),
		CorsPreflight: &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins: jsii.Strings(b.cfg.CORSOrigins...),
			AllowMethods: &[]awsapigatewayv2.CorsHttpMethod{
				awsapigatewayv2.CorsHttpMethod_GET, awsapigatewayv2.CorsHttpMethod_POST,
				awsapigatewayv2.CorsHttpMethod_PUT, awsapigatewayv2.CorsHttpMethod_PATCH,
				awsapigatewayv2.CorsHttpMethod_DELETE,
			},
			AllowHeaders:  jsii.Strings("authorization", "content-type", "if-match", "idempotency-key"),
			ExposeHeaders: jsii.Strings("etag", "location"),
			MaxAge:        awscdk.Duration_Hours(jsii.Number(1)),
		},
	})
	accessLogs := awslogs.NewLogGroup(b.s.Stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/apigateway/" + b.cfg.Name + "-api"),
		Retention:     b.cfg.LogRetention,
		RemovalPolicy: b.cfg.RemovalPolicy(),
	})
	// The $default stage: a named stage would prefix every rawPath.
	stage := awsapigatewayv2.NewHttpStage(b.s.Stack, jsii.String("HttpApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(float64(b.cfg.APIRateLimit)),
			BurstLimit: jsii.Number(float64(b.cfg.APIBurstLimit)),
		},
	})
	cfnStage := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat()),
	})

	parts := httpAPIParts{api: api, stage: stage}
	seen := map[string]bool{}
	for _, r := range routes {
		method := strings.ToUpper(r.Method)
		key := method + " " + r.Path
		if seen[key] {
			return fmt.Errorf("http api: route %s declared twice", key)
		}
		seen[key] = true
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(method)},
			Integration: integration,
			Authorizer:  authorizer,
		}
		if r.Public {
			opts.Authorizer = awsapigatewayv2.NewHttpNoneAuthorizer()
		}
		added := api.AddRoutes(opts)
		if r.Public {
			parts.public = append(parts.public, *added...)
		}
	}
	b.api = parts

	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(b.s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out(OutputAPIURL, stage.Url(), "base URL of the HTTP API")
	out(OutputUserPoolID, pool.UserPoolId(), "Cognito user pool that issues the API's tokens")
	out(OutputUserPoolClient, client.UserPoolClientId(), "app client id (audience of the tokens)")
	out(OutputArchiveBucket, b.s.Archive.BucketName(), "bucket of archived orders and carts")
	out(OutputSearchEndpoint, b.s.Search.DomainEndpoint(), "OpenSearch domain endpoint")
	return nil
}
