// Package reviews holds what a review is and its rules: one review per user and
// product, a rating from 1 to 5, a title and an optional body.
package reviews

import (
	"strings"
	"unicode/utf8"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/text"
)

// Limits of review fields.
const (
	MinRating   = 1
	MaxRating   = 5
	MaxTitleLen = 200
	MaxBodyLen  = 10000
)

// Review is one user's review of one product.
type Review struct {
	ProductID string `json:"productId" dynamodbav:"productId"`
	UserID    string `json:"userId" dynamodbav:"userId"`
	Rating    int    `json:"rating" dynamodbav:"rating"`
	Title     string `json:"title" dynamodbav:"title"`
	Body      string `json:"body" dynamodbav:"body"`
	// CreatedAt is when the review was first written: a replacement keeps it, so
	// "newest first" does not reward rewriting a review.
	CreatedAt string `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt string `json:"updatedAt" dynamodbav:"updatedAt"`
	Version   int64  `json:"version" dynamodbav:"version"`
	// Shape is the version of the item's stored shape; absent on items
	// written before shapes were recorded, which are shape 1.
	Shape int `json:"-" dynamodbav:"shape,omitempty"`
}

// Input is the body of a review write.
type Input struct {
	Rating *int   `json:"rating"`
	Title  string `json:"title"`
	Body   string `json:"body"`
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (in Input) Validate() error {
	var f errcode.Fields
	switch {
	case in.Rating == nil:
		f.Add("rating", "is required")
	case *in.Rating < MinRating || *in.Rating > MaxRating:
		f.Add("rating", "must be from %d to %d", MinRating, MaxRating)
	}
	switch {
	case strings.TrimSpace(in.Title) == "":
		f.Add("title", "is required")
	case !utf8.ValidString(in.Title):
		f.Add("title", "is not valid UTF-8")
	case utf8.RuneCountInString(in.Title) > MaxTitleLen:
		f.Add("title", "is longer than %d characters", MaxTitleLen)
	case text.Line(in.Title) != "":
		f.Add("title", "%s", text.Line(in.Title))
	}
	switch {
	case !utf8.ValidString(in.Body):
		f.Add("body", "is not valid UTF-8")
	case utf8.RuneCountInString(in.Body) > MaxBodyLen:
		f.Add("body", "is longer than %d characters", MaxBodyLen)
	case text.Block(in.Body) != "":
		f.Add("body", "%s", text.Block(in.Body))
	}
	return f.Err()
}
