package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"

	"github.com/shopstream/shopstream/infra/ops/admins"
	"github.com/shopstream/shopstream/infra/ops/target"
)

// adminCommand runs `make admin-add WHO=…` and `make admin-remove WHO=…`
// on a stage's user pool (docs/deploy.md, "Admins need a second factor").
func adminCommand(ctx context.Context, t *target.Target, args []string, e env) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(e.stdout)
	user := fs.String("user", "", "the user's name or e-mail address")
	remove := fs.Bool("remove", false, "take the user out of admin instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return errors.New("-user is required (make admin-add WHO=<name or e-mail> STAGE=<stage>)")
	}
	if t.Local() {
		return errors.New("the local stack has no user pool: `make token SUB=<id> ADMIN=1` signs an admin's token; run this with STAGE=<stage>")
	}
	pool := cip.NewFromConfig(t.AWS)
	if *remove {
		return admins.Remove(ctx, pool, t.UserPoolID, *user, e.stdout)
	}
	if err := admins.Add(ctx, pool, t.UserPoolID, *user, e.stdout); err != nil {
		return fmt.Errorf("nothing changed unless said above: %w", err)
	}
	return nil
}
