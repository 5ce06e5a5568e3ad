package facts

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

type typesAV = types.AttributeValue

func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
