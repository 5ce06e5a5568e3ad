// Package stagedsecret reads a Secrets Manager secret with the versions a
// rotation keeps valid: the one labelled AWSCURRENT signs, and the ones
// labelled AWSPENDING (about to become current) and AWSPREVIOUS (just
// replaced) are still accepted, so that a rotation never rejects a value
// issued a moment before or after it.
package stagedsecret

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// Version stages Secrets Manager's rotation moves between versions.
const (
	Current  = "AWSCURRENT"
	Pending  = "AWSPENDING"
	Previous = "AWSPREVIOUS"
)

// MinLen is the shortest secret value Load accepts.
const MinLen = 16

// Secret is a secret's current value and the other values still valid.
type Secret struct {
	Current []byte
	// Others are the pending and previous values, those that exist.
	Others [][]byte
}

type valueGetter interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Load reads the current, pending and previous values of the secret id (its
// ARN). Only the current value must exist; every value must be a string of at
// least MinLen bytes.
func Load(ctx context.Context, sm valueGetter, id string) (Secret, error) {
	var s Secret
	for _, stage := range []string{Current, Pending, Previous} {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id), VersionStage: aws.String(stage)})
		var missing *types.ResourceNotFoundException
		if stage != Current && errors.As(err, &missing) {
			continue
		}
		if err != nil {
			return Secret{}, fmt.Errorf("secret %s %s: %w", id, stage, err)
		}
		v := []byte(aws.ToString(out.SecretString))
		if len(v) < MinLen {
			return Secret{}, fmt.Errorf("secret %s %s: %d bytes, want a string of at least %d", id, stage, len(v), MinLen)
		}
		if stage == Current {
			s.Current = v
		} else if string(v) != string(s.Current) {
			s.Others = append(s.Others, v)
		}
	}
	return s, nil
}
