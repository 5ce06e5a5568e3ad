package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscognito"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// adminGate gives the user pool its pre-token-generation trigger
// (functions/pre-token, event version 2, whose group override reaches the
// access token too): a token carries the admin group only for an admin with
// TOTP enabled, whom the pool challenges for it at every sign-in, and a
// member without it leaves the group (docs/deploy.md, "Admins need a second
// factor"). The trigger may read this pool's users and take one out of
// admin, nothing else.
// That grant is a policy of its own: in the role's default policy it would
// make the function wait for the pool, which waits for the function.
func (b *builder) adminGate(pool awscognito.UserPool) error {
	fn, err := b.goFunction(TokenFunction, Access{MemoryMiB: 128, Timeout: 5 * time.Second}, map[string]*string{})
	if err != nil {
		return err
	}
	pool.AddTrigger(awscognito.UserPoolOperation_PRE_TOKEN_GENERATION_CONFIG(), fn, awscognito.LambdaVersion_V2_0)
	awsiam.NewPolicy(b.s.Stack, jsii.String("PreTokenReadsUsers"), &awsiam.PolicyProps{
		Roles: &[]awsiam.IRole{fn.Role()},
		Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("cognito-idp:AdminGetUser", "cognito-idp:AdminRemoveUserFromGroup"),
			Resources: jsii.Strings(*pool.UserPoolArn()),
		})},
	})
	return nil
}
