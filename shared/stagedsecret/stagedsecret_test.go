package stagedsecret

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/google/go-cmp/cmp"
)

// stages is a fake of GetSecretValue: the value of each version stage of one
// secret, and the calls it got.
type stages struct {
	id     string
	values map[string]string
	fail   error
	calls  []string
}

func (f *stages) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls = append(f.calls, aws.ToString(in.SecretId)+" "+aws.ToString(in.VersionStage))
	if f.fail != nil {
		return nil, f.fail
	}
	v, ok := f.values[aws.ToString(in.VersionStage)]
	if !ok || aws.ToString(in.SecretId) != f.id {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Secrets Manager can't find the specified secret value")}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

func TestLoad(t *testing.T) {
	const id = "arn:aws:secretsmanager:us-east-1:123456789012:secret:shopstream-dev-cursor-secret-AbCdEf"
	cur, pend, prev := strings.Repeat("c", 48), strings.Repeat("n", 48), strings.Repeat("p", 48)
	for _, tc := range []struct {
		name   string
		values map[string]string
		want   Secret
		err    string
	}{
		{name: "current only", values: map[string]string{Current: cur}, want: Secret{Current: []byte(cur)}},
		{name: "during a rotation", values: map[string]string{Current: cur, Pending: pend, Previous: prev}, want: Secret{Current: []byte(cur), Others: [][]byte{[]byte(pend), []byte(prev)}}},
		{name: "after a rotation", values: map[string]string{Current: cur, Previous: prev}, want: Secret{Current: []byte(cur), Others: [][]byte{[]byte(prev)}}},
		{name: "pending is current", values: map[string]string{Current: cur, Pending: cur}, want: Secret{Current: []byte(cur)}},
		{name: "no current", values: map[string]string{Previous: prev}, err: "AWSCURRENT"},
		{name: "short", values: map[string]string{Current: "short"}, err: "at least 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &stages{id: id, values: tc.values}
			got, err := Load(context.Background(), f, id)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{id + " " + Current, id + " " + Pending, id + " " + Previous}, f.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestLoadKeepsOtherErrors(t *testing.T) {
	denied := errors.New("AccessDeniedException")
	_, err := Load(context.Background(), &stages{fail: denied}, "x")
	if !errors.Is(err, denied) {
		t.Fatalf("got %v, want the access error wrapped", err)
	}
}
