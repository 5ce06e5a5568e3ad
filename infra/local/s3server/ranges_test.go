package s3server_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestRangedGetCarriesNoWholeObjectChecksum: an object put with a CRC32
// (the SDKs add one by default), read by a range, as S3 answers it: 206,
// the bytes asked for, and no checksum of the whole object, which a client
// that validates checksums (the SDKs do by default, and download managers
// read large objects by ranges) would find wrong and refuse. A read of the
// whole object keeps its checksum, and the client validates it.
func TestRangedGetCarriesNoWholeObjectChecksum(t *testing.T) {
	c := client(t, memServer(t))
	body := strings.Repeat("archive-", 1000)
	put(t, c, "r.txt", body, func(in *s3.PutObjectInput) { in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32 })
	ctx := context.Background()

	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("r.txt"), Range: aws.String("bytes=0-6"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("ranged get: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("ranged get: read: %v", err)
	}
	if string(got) != "archive" || aws.ToString(out.ContentRange) != "bytes 0-6/8000" {
		t.Errorf("ranged get: %q, range %q; want %q, bytes 0-6/8000", got, aws.ToString(out.ContentRange), "archive")
	}
	if out.ChecksumCRC32 != nil {
		t.Errorf("ranged get: checksum %s, want none (it is the whole object's)", aws.ToString(out.ChecksumCRC32))
	}

	whole, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("r.txt"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	all, err := io.ReadAll(whole.Body)
	whole.Body.Close()
	if err != nil || string(all) != body {
		t.Fatalf("get: %d bytes, %v; want the object, validated", len(all), err)
	}
	if whole.ChecksumCRC32 == nil {
		t.Error("get of the whole object: no checksum, want the one it was put with")
	}
}

// TestListV2SaysKeyCountZero: a ListObjectsV2 that finds nothing says
// KeyCount 0, as S3 does (the store left it out, which boto3 reads as
// None); one that finds keys says how many.
func TestListV2SaysKeyCountZero(t *testing.T) {
	c := client(t, memServer(t))
	ctx := context.Background()
	put(t, c, "a/1", "x")
	for prefix, want := range map[string]int32{"none/": 0, "a/": 1} {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		if out.KeyCount == nil || *out.KeyCount != want || len(out.Contents) != int(want) {
			t.Errorf("list %s: KeyCount %v, %d keys; want %d", prefix, out.KeyCount, len(out.Contents), want)
		}
	}
}
