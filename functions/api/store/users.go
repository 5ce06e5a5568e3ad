package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/users"
)

// emailClaim is the item of the user-emails table: who owns an address.
type emailClaim struct {
	Email     string `dynamodbav:"email"`
	UserID    string `dynamodbav:"userId"`
	CreatedAt string `dynamodbav:"createdAt"`
	Shape     int    `dynamodbav:"shape,omitempty"`
}

func userKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: id}}
}

func emailKey(email string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"email": &types.AttributeValueMemberS{Value: users.EmailKey(email)}}
}

func mustBuild(b expression.Builder) expression.Expression {
	e, err := b.Build()
	if err != nil {
		// The builders are fed constants and values only; an error is a bug here.
		panic(fmt.Sprintf("build expression: %v", err))
	}
	return e
}

func notExists(attr string) expression.Expression {
	return mustBuild(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(attr))))
}

// CreateUser registers user id with the email and name of n, claiming the
// email in the same transaction. Codes: Conflict (the user or the email
// exists).
func (s *Store) CreateUser(ctx context.Context, id string, n users.New) (users.User, error) {
	now := s.stamp()
	u := users.User{
		UserID: id, Email: strings.TrimSpace(n.Email), Name: strings.TrimSpace(n.Name),
		CreatedAt: now, UpdatedAt: now, Version: 1, Shape: shapes.User,
	}
	item, err := attributevalue.MarshalMap(u)
	if err != nil {
		return users.User{}, fmt.Errorf("create user %s: %w", id, err)
	}
	claim, err := attributevalue.MarshalMap(emailClaim{Email: users.EmailKey(u.Email), UserID: id, CreatedAt: now, Shape: shapes.UserEmail})
	if err != nil {
		return users.User{}, fmt.Errorf("create user %s: %w", id, err)
	}
	userCond, emailCond := notExists("userId"), notExists("email")
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(s.t.Users), Item: item,
			ConditionExpression: userCond.Condition(), ExpressionAttributeNames: userCond.Names(),
		}},
		{Put: &types.Put{
			TableName: aws.String(s.t.UserEmails), Item: claim,
			ConditionExpression: emailCond.Condition(), ExpressionAttributeNames: emailCond.Names(),
		}},
	}}
	for attempt := 1; ; attempt++ {
		_, err = s.db.TransactWriteItems(ctx, in)
		c, ok := cancelled(err)
		switch {
		case err == nil:
			return u, nil
		case ok && c.failed(0):
			return users.User{}, errcode.Errorf(errcode.Conflict, "user %s already exists", id)
		case ok && c.failed(1):
			return users.User{}, errcode.Errorf(errcode.Conflict, "the email address is already in use")
		case ok && c.retryable() && attempt < s.cfg.MaxAttempts:
			if err := s.backoff(ctx, attempt); err != nil {
				return users.User{}, err
			}
		case ok && c.retryable():
			return users.User{}, contention("create user")
		default:
			return users.User{}, fmt.Errorf("create user %s: %w", id, classify(err))
		}
	}
}

// GetUser returns user id, read strongly consistent: a profile just
// registered or changed shows as it is. Codes: NotFound.
func (s *Store) GetUser(ctx context.Context, id string) (users.User, error) {
	return s.getUser(ctx, id, true)
}

func (s *Store) getUser(ctx context.Context, id string, consistent bool) (users.User, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.Users), Key: userKey(id), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return users.User{}, fmt.Errorf("get user %s: %w", id, classify(err))
	}
	if out.Item == nil {
		return users.User{}, errcode.Errorf(errcode.NotFound, "user %s not found", id)
	}
	var u users.User
	if err := attributevalue.UnmarshalMap(s.readable(ctx, facts.User, "userId", id, out.Item), &u); err != nil {
		return users.User{}, fmt.Errorf("get user %s: %w", id, err)
	}
	return u, nil
}

// PatchUser changes the name and email of user id; an email change moves the
// claim in the same transaction. A new address must be tokenEmail, the email
// claim of the user's own token (users.OwnEmail); an unchanged one may be
// sent back as it is. ifMatch, when not nil, is the version the caller saw.
// A claim on the old address that is missing, or that another user holds, is
// left alone: the move puts the new claim and releases nothing it does not
// own. Codes: NotFound, Conflict (the email is taken), PreconditionFailed,
// Forbidden and Invalid (from users.OwnEmail).
func (s *Store) PatchUser(ctx context.Context, id string, p users.Patch, ifMatch *int64, tokenEmail string) (users.User, error) {
	oldClaimOwned := true
	for attempt := 1; ; attempt++ {
		if attempt > s.cfg.MaxAttempts {
			return users.User{}, contention("patch user")
		}
		cur, err := s.getUser(ctx, id, true)
		if err != nil {
			return users.User{}, fmt.Errorf("patch user: %w", err)
		}
		if ifMatch != nil && *ifMatch != cur.Version {
			return users.User{}, errcode.Errorf(errcode.PreconditionFailed, "user %s is at version %d", id, cur.Version)
		}
		next := cur
		if p.Name != nil {
			next.Name = strings.TrimSpace(*p.Name)
		}
		if p.Email != nil && !users.SameEmail(*p.Email, cur.Email) {
			own, err := users.OwnEmail(tokenEmail, *p.Email)
			if err != nil {
				return users.User{}, fmt.Errorf("patch user %s: %w", id, err)
			}
			next.Email = own
		}
		next.UpdatedAt = s.stamp()
		next.Version = cur.Version + 1

		upd := expression.Set(expression.Name("name"), expression.Value(next.Name)).
			Set(expression.Name("email"), expression.Value(next.Email)).
			Set(expression.Name("updatedAt"), expression.Value(next.UpdatedAt)).
			Set(expression.Name("version"), expression.Value(next.Version))
		cond := expression.Name("version").Equal(expression.Value(cur.Version))
		e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
		update := &types.Update{
			TableName: aws.String(s.t.Users), Key: userKey(id),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}

		moving := users.EmailKey(next.Email) != users.EmailKey(cur.Email)
		if !moving {
			_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: update.TableName, Key: update.Key, UpdateExpression: update.UpdateExpression,
				ConditionExpression: update.ConditionExpression, ExpressionAttributeNames: update.ExpressionAttributeNames,
				ExpressionAttributeValues: update.ExpressionAttributeValues,
			})
			if _, ok := isConditionFailed(err); ok {
				continue // changed since read: read again (If-Match then decides)
			}
			if err != nil {
				return users.User{}, fmt.Errorf("patch user %s: %w", id, classify(err))
			}
			return next, nil
		}

		claim, err := attributevalue.MarshalMap(emailClaim{Email: users.EmailKey(next.Email), UserID: id, CreatedAt: next.UpdatedAt, Shape: shapes.UserEmail})
		if err != nil {
			return users.User{}, fmt.Errorf("patch user %s: %w", id, err)
		}
		free := notExists("email")
		actions := []types.TransactWriteItem{
			{Update: update},
			{Put: &types.Put{
				TableName: aws.String(s.t.UserEmails), Item: claim,
				ConditionExpression: free.Condition(), ExpressionAttributeNames: free.Names(),
			}},
		}
		if oldClaimOwned {
			owned := mustBuild(expression.NewBuilder().WithCondition(expression.Name("userId").Equal(expression.Value(id))))
			actions = append(actions, types.TransactWriteItem{Delete: &types.Delete{
				TableName: aws.String(s.t.UserEmails), Key: emailKey(cur.Email),
				ConditionExpression: owned.Condition(), ExpressionAttributeNames: owned.Names(), ExpressionAttributeValues: owned.Values(),
			}})
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		c, ok := cancelled(err)
		switch {
		case err == nil:
			return next, nil
		case ok && c.failed(1):
			return users.User{}, errcode.Errorf(errcode.Conflict, "the email address is already in use")
		case ok && c.failed(0):
			continue
		case ok && c.failed(2):
			// The old address's claim is gone (lost, or written under an
			// older EmailKey) or held by another user: not ours to release.
			// The user's version still guards the move.
			oldClaimOwned = false
		case ok && c.retryable() && attempt < s.cfg.MaxAttempts:
			if err := s.backoff(ctx, attempt); err != nil {
				return users.User{}, err
			}
		case ok && c.retryable():
			return users.User{}, contention("patch user")
		default:
			return users.User{}, fmt.Errorf("patch user %s: %w", id, classify(err))
		}
	}
}

// userExists is a transaction check that the user is registered.
func (s *Store) userExists(id string) types.TransactWriteItem {
	e := mustBuild(expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name("userId"))))
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.t.Users), Key: userKey(id),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(),
	}}
}
